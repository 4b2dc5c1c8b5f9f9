"""The documentation site builds with ``mkdocs build --strict`` (a dead link, a missing page or a
missing included file fails it), and every page is in its navigation."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# One page per finding id is reached from its index page, not listed in the navigation.
OFF_NAV = ("findings/",)


def nav_pages() -> set[str]:
    """The pages mkdocs.yml's navigation names (read as text: PyYAML may not be installed)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return set(re.findall(r"([\w./-]+\.md)\s*$", nav, re.M))


def test_every_page_is_in_the_navigation():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    listed = nav_pages()
    assert listed <= pages, f"the navigation names missing pages: {sorted(listed - pages)}"
    missing = sorted(p for p in pages - listed if not p.startswith(OFF_NAV))
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None
                    or importlib.util.find_spec("material") is None,
                    reason="mkdocs-material is not installed: pip install -r "
                           "docs/requirements.txt")
def test_the_site_builds_strictly(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "commands" / "scan" / "index.html").is_file()
    # The examples are shown as the files are, not as copies that could drift.
    ci = (tmp_path / "site" / "guide" / "ci" / "index.html").read_text(encoding="utf-8")
    assert "--8&lt;--" not in ci and "action-junit-report" in ci
