"""Foreign text through every renderer that used to let it by: merge's "duplicate of" and node
cells, diff's findings, the table-row builder, a scan read back from a saved document, diag's
and snapshot's markdown, explain's terminal text and Prometheus labels. A markdown line never
starts a workflow command, carries a control character, or embeds HTML, a link or an image."""

from __future__ import annotations

import dataclasses
import io
import json
import re

import pytest

from gpu_audit.diff import compare
from gpu_audit.diff.render import render_diff_markdown
from gpu_audit.explain.api import ExplainResult, InputStats
from gpu_audit.explain.classify import Incident, Location
from gpu_audit.explain.render import render_terminal as explain_terminal
from gpu_audit.fleet.judge import judge_fleet
from gpu_audit.fleet.nodes import node_from_document
from gpu_audit.fleet.render import render_markdown as fleet_markdown
from gpu_audit.model import Severity
from gpu_audit.report import escape
from gpu_audit.report.markdown import render_scan_markdown
from gpu_audit.report.prometheus import render_textfile
from gpu_audit.report.terminal import make_console
from gpu_audit.rules import evaluate
from tests import builders as b
from tests.fleet.synth import node_document

EVIL = ("\x1b]0;owned\x07node\x1b[2J\r\n::error file=x,line=1::fake\x00\x9b31m"
        "<img src=x onerror=alert(1)> [x](http://e) ![i](http://e/i.png) ##[error]old")
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
WORKFLOW_LINE = re.compile(r"^\s*::|##\[")


def assert_safe_markdown(text: str) -> None:
    """No control character, no workflow command, no HTML, link or image from ``EVIL``."""
    assert not CONTROLS.search(text), repr(CONTROLS.search(text))
    commands = [line for line in text.splitlines() if WORKFLOW_LINE.search(line)]
    assert not commands, commands
    prose = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1$", "", text)  # code shows text as text
    prose = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", prose)
    assert "<img" not in prose
    assert "[x](http" not in prose and "![i](http" not in prose


def assert_rows_intact(text: str) -> None:
    """Every table row is one line: it starts and ends with a pipe."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|"):
            assert line.rstrip().endswith("|"), line
        elif i and lines[i - 1].startswith("|"):
            assert not line.strip() or not line.startswith(" "), line


# --- merge: the "duplicate of" cell and the node table ---------------------------------------

def _fleet(documents):
    nodes = [node_from_document(json.loads(json.dumps(d)), f"check-{i}.json")
             for i, d in enumerate(documents)]
    return judge_fleet(nodes, source="merge")


def test_merge_duplicate_of_cell_escapes_the_host_name():
    report = _fleet([node_document(0, hostname=EVIL), node_document(0, hostname=EVIL),
                     node_document(1)])
    assert any(n.duplicate_of for n in report.nodes)
    text = fleet_markdown(report)
    assert "duplicate of" in text
    assert_safe_markdown(text)
    assert_rows_intact(text)


def test_merge_node_table_escapes_every_field_of_a_document():
    report = _fleet([node_document(0, driver=EVIL, cuda=EVIL, torch=EVIL, tool=EVIL),
                     node_document(1), node_document(2)])
    text = fleet_markdown(report)
    assert_safe_markdown(text)
    assert_rows_intact(text)


# --- diff: a process name that starts a workflow command --------------------------------------

def test_diff_markdown_keeps_a_process_name_on_its_line():
    stray = b.process(4242, 8192, ["python", "x.py"], name="evil\n::error::pwned " + EVIL)
    before = b.scan(processes=[])
    after = b.scan(processes=[stray], generated_at="2026-11-22T11:00:00Z")
    report = compare(before, after)
    assert report.findings  # the leak is judged, so its detail names the process
    text = render_diff_markdown(report)
    assert "4242" in text and "pwned" in text
    assert_safe_markdown(text)
    assert_rows_intact(text)


# --- the table-row builder and the prose helpers --------------------------------------------

def test_every_markdown_table_cell_is_escaped_by_the_row_builder():
    table = escape.md_table(["a", "b"], [[EVIL, 7], [None, "x|y"]])
    assert_safe_markdown(table)
    assert all(line.count(" | ") == 1 for line in table.splitlines() if "---" not in line)
    assert escape.md_row([escape.Markdown("**ok**"), "*x*"]) == "| **ok** | *x* |"


@pytest.mark.parametrize("render", [
    lambda t: escape.md_text(t, newlines=True),
    lambda t: escape.md_fence(t),
    lambda t: escape.md_code(t),
    lambda t: escape.md_document(t),
])
def test_no_markdown_helper_lets_a_line_start_a_workflow_command(render):
    out = render("a\n::error::x\n  ::warning::y\n##[error]z")
    assert not [line for line in out.splitlines() if WORKFLOW_LINE.search(line)], out


def test_a_scan_read_back_from_a_document_escapes_its_own_fields():
    scan = b.scan(generated_at=EVIL, tool_version=EVIL, processes=[b.process(1, 10)])
    text = render_scan_markdown(scan, evaluate(scan), 0)
    assert_safe_markdown(text)


# --- diag, snapshot and explain -------------------------------------------------------------

def test_diag_markdown_escapes_host_versions_and_reasons():
    from gpu_audit.diag.judge import judge
    from gpu_audit.diag.render import render_markdown
    from gpu_audit.diag.results import DiagOptions, DiagResult
    from tests.diag import recorded

    runs = [recorded.half_width_h100()]
    judgement = dataclasses.replace(judge(2, runs), unknown=[EVIL])
    result = DiagResult(options=DiagOptions(level=2), generated_at="2026-11-23T10:00:00Z",
                        hostname=EVIL, selection=None, gpus=runs, peers=None,
                        judgement=judgement, plans={}, estimate={"seconds": 60},
                        driver_version=EVIL, torch_version=EVIL)
    text = render_markdown(result)
    assert "could not judge" in text
    assert_safe_markdown(text)


def test_snapshot_markdown_masks_and_escapes_the_recorded_settings():
    from gpu_audit.serial import dumps
    from gpu_audit.snapshot.render import render_markdown, snapshot_document
    from gpu_audit.snapshot.summary import SnapshotSummary

    token = "hf_Qz7a1B2c3D4e5F6g7H8i9J0k1Lm"
    summary = SnapshotSummary(format="snapshot", devices=[], notes=[EVIL],
                              allocator_settings={"PYTORCH_CUDA_ALLOC_CONF":
                                                  f"expandable_segments:True,hf:{token}"})
    text = render_markdown(summary, title=EVIL, generated_at="now", source=EVIL)
    assert_safe_markdown(text)
    assert token not in text and token not in dumps(
        snapshot_document(summary, generated_at="now", source={}))


def test_explain_terminal_text_carries_no_escape_sequence():
    incident = Incident(cls="cuda-oom", signature="cuda-oom/x", title=f"title {EVIL}",
                        severity=Severity.ERROR, role="root-cause",
                        explanation=f"because {EVIL}", remedy=f"export X=1\n{EVIL}",
                        line_numbers=[1], excerpt=EVIL, numbers={"alloc_conf": EVIL},
                        count=1, locations=[Location(EVIL, 1)])
    result = ExplainResult([incident], [InputStats(EVIL, 10, 1)])
    buffer = io.StringIO()
    explain_terminal(result, make_console(buffer), fail_on=Severity.ERROR)
    out = buffer.getvalue()
    assert "because" in out and "export X=1" in out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert not [line for line in out.splitlines() if WORKFLOW_LINE.search(line)]


# --- Prometheus labels ----------------------------------------------------------------------

def test_prometheus_labels_carry_no_control_character_or_lone_surrogate():
    proc = b.process(4242, 900, ["python", "t.py"], user="eve\x1b[2J\ud800")
    scan = b.with_host(b.scan(processes=[proc]), hostname="node\x1b]0;x\x07")
    text = render_textfile(scan, evaluate(scan), 0, duration_s=1.0).decode("utf-8")
    assert "gpu_audit_processes" in text
    assert not CONTROLS.search(text.replace("\n", ""))
    assert "\\x1b" in text  # shown, not dropped
