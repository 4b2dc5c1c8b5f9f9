"""One escaping function per output format, for every string gpu-audit did not write itself.

Command lines, process names, log lines and file names come from other users and other
programs. Rendered raw, they could drive a terminal (``ESC ] 0 ;``, ``ESC [ 2 J``), start a
GitHub workflow command in a CI log (a newline followed by ``::error ::``), break a JUnit file
(characters XML cannot carry) or inject HTML and links into a markdown report. Every renderer
passes such strings through the function for its format:

- :func:`terminal` / :func:`terminal_markup`: a rich console, on a terminal or piped into a log;
- :func:`workflow_data` / :func:`workflow_property`: a GitHub workflow command's message and
  property values;
- :func:`xml_text`: JUnit XML text and attribute values;
- :func:`plugin_text`: a line of monitoring-plugin (Nagios) output;
- :func:`metric_label`: a Prometheus label value (the exposition format's own escapes of ``\\``,
  ``"`` and newlines are ``prometheus_client``'s);
- :func:`md_text`, :func:`md_cell` and :func:`md_code`: markdown text, table cells and inline
  code (code blocks: :func:`md_fence`); :func:`md_prose` and :func:`md_prose_cell`: gpu-audit's
  own sentences, whose backticked commands and keys become code spans; tables are built by
  :func:`md_table` / :func:`md_row`, which escape every cell (what a renderer wrote as markup
  itself is marked :class:`Markdown`), and a whole document passes :func:`md_document` as it
  leaves.

No markdown line can start a workflow command (a report is also printed into CI logs), carry a
control character, or embed HTML, a link or an image from foreign text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# C0 controls except tab and newline, DEL, and the C1 controls (U+0080-U+009F: CSI, OSC...).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_AND_NEWLINES = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_LINE_ENDS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# GitHub's runner takes a line whose trimmed text starts with ``::`` as a workflow command,
# and ``##[`` anywhere in a line as an old-style one. A zero-width space (which .NET's Trim()
# keeps) before them leaves the text as it reads and makes it no command.
_WORKFLOW_START = re.compile(r"(?m)^(\s*)(::)")
_ZWSP = "\u200b"
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Lone surrogates (JSON's "\ud800" decodes to one) cannot be written as UTF-8: U+FFFD instead.
_SURROGATE = re.compile("[\ud800-\udfff]")
# Enough to stop links, images, code spans and table breaks; emphasis characters stay as they
# are (``max_split_size_mb`` must read as itself in the raw file too).
_MD_SPECIAL = re.compile(r"([\\`\[\]|])")


def _visible(match: re.Match[str]) -> str:
    """A control character as text: ``\\x1b``, ``\\n``."""
    char = match[0]
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return named.get(char, f"\\x{ord(char):02x}")


def controls(text: str, *, newlines: bool = True) -> str:
    """``text`` with control characters shown as ``\\x1b``-style escapes (newlines kept when
    ``newlines``; tabs always)."""
    text = _SURROGATE.sub("\ufffd", text)
    return (_CONTROL if newlines else _CONTROL_AND_NEWLINES).sub(_visible, text)


def no_workflow_commands(text: str) -> str:
    """``text`` unable to start a GitHub workflow command on any of its lines."""
    text = _WORKFLOW_START.sub(lambda m: m[1] + _ZWSP + m[2], text)
    return text.replace("##[", "##" + _ZWSP + "[")


def terminal(text: str, *, newlines: bool = True) -> str:
    """Plain text for a console or a CI log: no escape sequences, no workflow commands."""
    return no_workflow_commands(controls(str(text), newlines=newlines))


def terminal_markup(text: str, *, newlines: bool = True) -> str:
    """:func:`terminal`, then escaped for rich markup (``[bold]`` in a command line stays
    text)."""
    from rich.markup import escape

    return escape(terminal(text, newlines=newlines))


def workflow_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF encoded (as actions/toolkit does), other
    control characters shown as escapes."""
    text = _CONTROL_BUT_LINE_ENDS.sub(_visible, str(text))
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A workflow command's property value: the message escapes plus ``:`` and ``,``."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def xml_text(text: str) -> str:
    """Text XML 1.0 can carry: characters it cannot are replaced by U+FFFD (ElementTree escapes
    ``<``, ``&`` and quotes itself)."""
    return _XML_INVALID.sub("\ufffd", str(text))


def plugin_text(text: str) -> str:
    """One line of monitoring-plugin output (``--format nagios``): :func:`terminal` on one
    line, and no ``|``, which would start performance data there."""
    return terminal(text, newlines=False).replace("|", "/")


def metric_label(text: str) -> str:
    """A Prometheus label value: control characters shown as escapes (newlines too), so no
    scraper or terminal that shows the textfile meets them."""
    return controls(str(text), newlines=False)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_text(text: str, *, newlines: bool = False) -> str:
    """Markdown prose (one line unless ``newlines``): no HTML, links, images or code spans, and
    no line that starts a workflow command."""
    text = _MD_SPECIAL.sub(r"\\\1", _html(controls(str(text), newlines=newlines)))
    return no_workflow_commands(text)


def md_cell(text: str) -> str:
    """A markdown table cell: :func:`md_text` (pipes included)."""
    return md_text(text)


def md_code(text: str) -> str:
    """Inline code the text cannot close: a backtick run longer than any inside it (HTML and
    links cannot start inside a code span). Not for table cells: use :func:`md_cell`."""
    text = controls(str(text), newlines=False)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return no_workflow_commands(f"{ticks}{pad}{text}{pad}{ticks}")


def md_fence(text: str, language: str = "") -> str:
    """A fenced code block the text itself cannot close."""
    text = no_workflow_commands(controls(str(text)))
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{language}\n{text}\n{ticks}"


def md_prose(text: str, *, newlines: bool = False, cell: bool = False) -> str:
    r"""A sentence gpu-audit wrote (a summary, a title, a fix), which may quote foreign values:
    its paired backticks become code spans (\`gpu-audit scan\` reads as code, not with its
    backslashes) and the rest is escaped as :func:`md_text`. A code span shows its text as it
    is, so a foreign value inside one can add no HTML, link or image; an unpaired backtick makes
    the whole sentence plain escaped text. ``cell``: for a table cell (pipes escaped inside the
    spans too, as GitHub's tables need)."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:
        return md_text(text, newlines=newlines)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(md_text(part, newlines=newlines))
        elif part.strip():
            code = md_code(" ".join(part.split()))
            out.append(code.replace("|", "\\|") if cell else code)
        else:
            out.append(md_text(f"`{part}`", newlines=newlines))
    return "".join(out)


def md_prose_cell(text: str) -> str:
    """:func:`md_prose` for a table cell (table rows keep it: it is :class:`Markdown`)."""
    return Markdown(md_prose(text, cell=True))


class Markdown(str):
    """Markdown gpu-audit wrote itself (emphasis, a code span around an id it chose): a table row
    keeps it as written. Foreign text never goes into one without :func:`md_cell` or
    :func:`md_code` first."""

    __slots__ = ()


def md_row(cells: Iterable[object]) -> str:
    """One markdown table row: every cell escaped by :func:`md_cell` (numbers, names, reasons
    alike) but those marked :class:`Markdown`."""
    return "| " + " | ".join(c if isinstance(c, Markdown) else md_cell(str(c))
                             for c in cells) + " |"


def md_table(headers: list[str], rows: Iterable[Iterable[object]]) -> str:
    """A markdown table: the header row, the rule, and a :func:`md_row` per row."""
    lines = [md_row(headers), "|" + "---|" * len(headers)]
    lines += [md_row(row) for row in rows]
    return "\n".join(lines)


def md_document(text: str) -> str:
    """A whole markdown document as it leaves: whatever a renderer let through, no control
    character (newlines and tabs kept) and no line GitHub's runner would take for a workflow
    command."""
    return no_workflow_commands(controls(text))
