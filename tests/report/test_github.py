"""GitHub Actions output: escaped workflow commands, the 10-per-level cap, the step summary."""

from __future__ import annotations

import dataclasses
import re

from gpu_audit.check.engine import judge
from gpu_audit.check.results import CheckResult, CheckStatus
from gpu_audit.config import CheckPolicy
from gpu_audit.report.github import (
    annotations,
    append_step_summary,
    escape_data,
    escape_property,
    in_github_actions,
    render_check_markdown,
    step_summary,
    workflow_command,
)
from tests import builders as b

COMMAND = re.compile(
    r"^::(?P<level>error|warning|notice)(?: title=(?P<title>[^:]*))?::(?P<msg>.*)$")


def unescape(text: str) -> str:
    """What the runner does to a property or message (actions/toolkit's inverse)."""
    for encoded, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(encoded, char)
    return text


def report_with(results: list[CheckResult]):
    base = judge(b.scan(), CheckPolicy(), user="ci")
    return dataclasses.replace(base, results=results)


def problem(i: int, status: CheckStatus) -> CheckResult:
    return CheckResult(f"check-{i}", f"gpu:{i}", status, "T", f"problem {i}", remedy="do x")


def test_escaping_matches_the_toolkit():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c%\n") == "a%3A b%2C c%25%0A"
    line = workflow_command("error", "free: 10%\nfix: kill 1", "host: gpu:0, check")
    match = COMMAND.match(line)
    assert match and "\n" not in line
    assert unescape(match["title"]) == "host: gpu:0, check"
    assert unescape(match["msg"]) == "free: 10%\nfix: kill 1"


def test_failures_are_errors_and_warnings_warnings_with_their_fix():
    report = judge(b.gtx1650_three_uvicorn(), CheckPolicy(), user="alice")
    lines = annotations(report)
    parsed = [COMMAND.match(line) for line in lines]
    assert all(parsed)
    levels = [m["level"] for m in parsed]
    assert levels == ["error", "warning"]
    error = parsed[0]
    assert unescape(error["title"]) == "gpu-audit check on node1: duplicate-backends (pid:2101)"
    assert "\nFix: ps -o pid,lstart,args" in unescape(error["msg"])
    assert unescape(parsed[1]["title"]) == "gpu-audit check on node1: own-processes"


def test_unknown_checks_are_error_annotations_and_passes_are_silent():
    report = report_with([problem(0, CheckStatus.UNKNOWN), problem(1, CheckStatus.PASS),
                          problem(2, CheckStatus.SKIP)])
    (line,) = annotations(report)
    assert line.startswith("::error ")


def test_at_most_ten_of_each_level_then_a_notice_with_the_rest():
    results = [problem(i, CheckStatus.FAIL) for i in range(13)]
    results += [problem(100 + i, CheckStatus.WARN) for i in range(11)]
    lines = annotations(report_with(results))
    levels = [COMMAND.match(line)["level"] for line in lines]
    assert levels.count("error") == 10 and levels.count("warning") == 10
    assert levels[-1] == "notice"
    assert "3 more failures and 1 more warning not annotated" in unescape(lines[-1])
    assert "problem 0" in unescape(lines[0]) and "problem 12" not in "".join(lines)


def test_detection_of_github_actions():
    assert in_github_actions({"GITHUB_ACTIONS": "true"})
    assert not in_github_actions({"GITHUB_ACTIONS": "false"})
    assert not in_github_actions({})


def test_summary_puts_the_verdict_first_then_every_check_then_fixes():
    report = judge(b.gtx1650_three_uvicorn(), CheckPolicy(), user="alice")
    text = step_summary(report)
    lines = text.splitlines()
    assert lines[0] == "## ❌ gpu-audit check: CRITICAL on `node1`"
    assert "exit code 2" in lines[2]
    rows = [line for line in lines if line.startswith("| ") and "`" in line]
    assert len(rows) == len(report.results)
    assert "| ❌ fail | `duplicate-backends` | pid:2101 |" in text
    assert "| ⚠️ warn | `own-processes` | host |" in text
    assert "### How to fix" in text
    assert "```\nps -o pid,lstart,args -p 2101 2202 2303" in text
    assert "<details><summary>Evidence</summary>" in text and text.endswith("</details>\n")


def test_table_cells_cannot_break_the_table_or_inject_html():
    odd = CheckResult("gpu-name", "gpu:0", CheckStatus.FAIL, "GPU model",
                      "name a|b <script>\nsecond line", remedy="echo ```")
    text = render_check_markdown(report_with([odd]))
    (row,) = [line for line in text.splitlines() if "`gpu-name`" in line and "| ❌" in line]
    assert row.count(" | ") == 3 and "a\\|b" in row and "&lt;script&gt;" in row
    assert "<script>" not in text
    assert "````\necho ```\n````" in text  # the fence is longer than any run inside


def test_oversized_evidence_is_left_out_of_the_summary():
    huge = CheckResult("free-vram", "gpu:0", CheckStatus.PASS, "GPU memory free", "ok",
                       evidence={"blob": "x" * 700_000})
    text = step_summary(report_with([huge]))
    assert len(text.encode()) < 100_000
    assert "Evidence left out" in text


def test_appending_keeps_what_earlier_steps_wrote(tmp_path):
    summary = tmp_path / "step_summary"
    summary.write_text("# Build\nearlier step")
    summary.chmod(0o644)
    append_step_summary(summary, "## gpu-audit\n")
    append_step_summary(summary, "## again\n")
    assert summary.read_text() == "# Build\nearlier step\n## gpu-audit\n## again\n"
    assert summary.stat().st_mode & 0o777 == 0o644
    fresh = tmp_path / "new" / "summary.md"
    append_step_summary(fresh, "first\n")
    assert fresh.read_text() == "first\n"


def test_step_summary_shows_our_backticked_words_as_code():
    """"set `gpu_name` in the policy" reads as code in the summary, not with backslashes."""
    ours = CheckResult("gpu-name", "host", CheckStatus.SKIP, "GPU model",
                       "not configured (set `gpu_name` in the policy)")
    failed = CheckResult("free-vram", "gpu:0", CheckStatus.FAIL, "Free memory",
                         "run `gpu-audit scan` to see who holds it", remedy="x")
    text = render_check_markdown(report_with([ours, failed]))
    assert "`gpu_name`" in text and "\\`" not in text
    assert "run `gpu-audit scan` to see who holds it" in text


def test_step_summary_keeps_foreign_text_inert():
    """A process name with a link, HTML or a pipe stays text; inside a code span it is shown as
    it is (a span cannot carry a link or a tag), and an unpaired backtick stays escaped."""
    hostile = CheckResult("foreign-processes", "gpu:0", CheckStatus.FAIL, "Foreign",
                          "held by [x](http://evil) <img src=x> a|b and `rm | x` and `", remedy="x")
    text = render_check_markdown(report_with([hostile]))
    assert "[x](http://evil)" not in text and "<img" not in text
    assert "\\[x\\]" in text and "&lt;img" in text and "a\\|b" in text
    assert "\\`" in text  # the odd backtick makes the sentence plain escaped text
    paired = CheckResult("foreign-processes", "gpu:0", CheckStatus.FAIL, "Foreign",
                         "held by `[x](http://evil) | <b>`", remedy="x")
    row = next(line for line in render_check_markdown(report_with([paired])).splitlines()
               if "foreign-processes" in line and line.startswith("|"))
    assert "`[x](http://evil) \\| <b>`" in row  # code: shown, not followed; the pipe escaped
