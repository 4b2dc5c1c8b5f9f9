"""Foreign strings (another user's command line, a process name, a log line, a file name) cannot
drive a terminal, start a GitHub workflow command, break JUnit XML or inject markdown."""

from __future__ import annotations

import dataclasses
import io
import re
import xml.etree.ElementTree as ET

import pytest

from gpu_audit.check.engine import judge
from gpu_audit.check.results import CheckResult, CheckStatus
from gpu_audit.config import CheckPolicy
from gpu_audit.report import escape
from gpu_audit.report.github import annotations, render_check_markdown
from gpu_audit.report.junit import render_junit
from gpu_audit.report.markdown import render_scan_markdown
from gpu_audit.report.terminal import make_console, render_scan
from gpu_audit.rules import evaluate
from tests import builders as b

HOSTILE = ["\x1b]0;x\x07", "\x1b[2J", "a\n::error ::pwned", "<img src=x onerror=alert(1)>",
           "</details>", "[x](http://e)", "\x9b31m", "##[error]old style", "tab\there`code`|"]
WORKFLOW_LINE = re.compile(r"^\s*::|##\[")


def _no_escape_sequences(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text


def _no_workflow_commands(text: str) -> None:
    assert not [line for line in text.splitlines() if WORKFLOW_LINE.search(line)], text


@pytest.mark.parametrize("hostile", HOSTILE, ids=repr)
def test_terminal(hostile):
    for out in (escape.terminal(hostile), escape.terminal_markup(hostile)):
        _no_escape_sequences(out)
        _no_workflow_commands(out)
    assert escape.terminal("plain text [rank0]:") == "plain text [rank0]:"
    assert escape.terminal("\x1b[2J") == "\\x1b[2J"
    assert "\n" not in escape.terminal("a\nb", newlines=False)


@pytest.mark.parametrize("hostile", HOSTILE, ids=repr)
def test_workflow_commands(hostile):
    for out in (escape.workflow_data(hostile), escape.workflow_property(hostile)):
        _no_escape_sequences(out)
        assert "\n" not in out and "\r" not in out
    assert ":" not in escape.workflow_property(hostile) and "," not in escape.workflow_property(
        "a,b")
    assert escape.workflow_data("50% a\r\nb") == "50%25 a%0D%0Ab"


@pytest.mark.parametrize("hostile", HOSTILE, ids=repr)
def test_xml(hostile):
    element = ET.Element("t", {"a": escape.xml_text(hostile)})
    element.text = escape.xml_text(hostile)
    ET.fromstring(ET.tostring(element))  # parses: nothing XML 1.0 cannot carry


@pytest.mark.parametrize("hostile", HOSTILE, ids=repr)
def test_markdown(hostile):
    for out in (escape.md_text(hostile), escape.md_cell(hostile)):
        _no_escape_sequences(out)
        assert "<img" not in out and "</details>" not in out and "](" not in out.replace(
            "\\](", "")
        assert "\n" not in out
        assert "|" not in out.replace("\\|", "")
    code = escape.md_code("a``b")
    assert code.startswith("```") and code.endswith("```")
    assert escape.md_fence("```\nx").startswith("````")


# --- through the renderers -------------------------------------------------------------------


def _hostile_scan():
    argv = ["python", "\x1b]0;x\x07", "a\n::error ::pwned", "<img src=x onerror=alert(1)>",
            "</details>", "[x](http://e)", "\x1b[2J"]
    proc = b.process(4242, 900, argv, name="evil\x1b[2J\n::warning ::x")
    return b.scan(processes=[proc])


def test_scan_terminal_output_piped_carries_no_escape_or_workflow_command():
    scan = _hostile_scan()
    findings = evaluate(scan)
    buffer = io.StringIO()
    render_scan(scan, findings, 0, make_console(buffer), verbose=True)
    out = buffer.getvalue()
    assert "4242" in out
    _no_escape_sequences(out)
    _no_workflow_commands(out)


def test_scan_markdown_carries_no_html_or_links():
    scan = _hostile_scan()
    out = render_scan_markdown(scan, evaluate(scan), 0)
    assert "4242" in out
    _no_escape_sequences(out)
    assert "<img" not in out and "</details>" not in out and "[x](http" not in out


def _hostile_check():
    base = judge(b.scan(), CheckPolicy(), user="ci")
    evil = CheckResult("free-vram", "gpu:0", CheckStatus.FAIL, "T",
                       "held by a\n::error ::pwned </details> <img src=x> \x1b[2J [x](http://e)",
                       remedy="kill 1\n```\n</details>",
                       evidence={"cmdline": "</details><img src=x>"})
    return dataclasses.replace(base, results=[evil])


def test_check_markdown_annotations_and_junit():
    report = _hostile_check()
    markdown = render_check_markdown(report)
    _no_escape_sequences(markdown)
    assert "<img" not in markdown and "[x](http" not in markdown
    prose = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1$", "", markdown)  # code blocks show text
    assert prose.count("</details>") == 1  # ours, closing the evidence
    assert "</details><img" not in markdown
    lines = annotations(report)
    assert all("\n" not in line and "\x1b" not in line for line in lines)
    assert len(lines) == 1 and lines[0].startswith("::error ")
    root = ET.fromstring(render_junit(report).split("\n", 1)[1])
    assert "\x1b" not in ET.tostring(root, encoding="unicode")


def test_scan_report_shows_our_code_spans_as_code():
    """A finding's own backticked command is a code span in the markdown report; the same
    characters in a process's command line (foreign) stay escaped in the table."""
    scan = b.gtx1650_three_uvicorn()
    text = render_scan_markdown(scan, evaluate(scan), 1)
    assert "3 processes run `/home/alice/venv/bin/python3 /home/alice/venv/bin/uvicorn " \
        "app:app --host 0.0.0.0` on ports" in text
    assert "\\`" not in text


def test_md_prose_spans_and_escapes():
    assert escape.md_prose("run `gpu-audit scan` now") == "run `gpu-audit scan` now"
    assert escape.md_prose("a [link](x) `ok`") == "a \\[link\\](x) `ok`"
    assert escape.md_prose("odd ` tick <b>") == "odd \\` tick &lt;b&gt;"
    assert escape.md_prose_cell("`a|b` c|d") == "`a\\|b` c\\|d"
