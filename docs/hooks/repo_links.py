"""mkdocs hook: a link from a page to a file of the repository outside docs/ (an example, the
architecture notes) works where the markdown is read in the repository, but is no page of the
site. On the site it is shown as the file's path instead of a dead link; a link to a file that
does not exist is left alone, for ``mkdocs build --strict`` to refuse."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    here = Path(page.file.abs_src_path).resolve().parent

    def shown(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        if "://" in target or target.startswith(("#", "mailto:")):
            return match.group(0)
        path = (here / target.split("#", 1)[0]).resolve()
        if path == docs or docs in path.parents or root not in path.parents or not path.exists():
            return match.group(0)
        where = path.relative_to(root).as_posix()
        return label if label.strip("`") == where else f"{label} (`{where}`)"

    # Fenced code is left as it is: a link there is text.
    parts = re.split(r"(^```.*?^```)", markdown, flags=re.M | re.S)
    return "".join(part if part.startswith("```") else _LINK.sub(shown, part) for part in parts)
