"""``gpu-audit explain``'s terminal report fits the terminal: prose wraps between words with its
continuation lines under the text they continue, and what is pasted (a command, a variable
assignment, a path, a command quoted in backticks) is never broken."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest

from gpu_audit.explain import ExplainResult, Incident, InputStats, Location
from gpu_audit.explain.render import render_terminal
from gpu_audit.model import Severity
from gpu_audit.report.remedy import is_command
from gpu_audit.report.terminal import make_console
from tests.explain.helpers import FIXTURES

LOGS = ["a100_fragmented_oom_torch23.log", "qodo_encoder_nvml_assert.log",
        "ddp8_rank3_illegal_access_nccl_timeouts.log", "nccl_ib_completion_error.log",
        "nvidia_smi_driver_library_mismatch.log", "docker_default_shm_bus_error.log"]
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_LEAD = re.compile(r"^\s*(?:(?:Why|Fix): |> )?")


def report(log: str, columns: str | None, monkeypatch: pytest.MonkeyPatch,
           torch_version: str = "2.4.1") -> str:
    """The report as the command prints it into a pipe, with ``COLUMNS`` set (or not)."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("NO_COLOR", "1")
    from gpu_audit.explain import explain_sources

    result = explain_sources([str(FIXTURES / log)], torch_version=torch_version, workers=1)
    buffer = io.StringIO()
    render_terminal(result, make_console(buffer), fail_on=Severity.ERROR)
    return buffer.getvalue()


def unbreakable(line: str) -> bool:
    """A line that may be wider than the terminal: a remedy command kept whole, or a single
    word or backtick-quoted command that is wider on its own."""
    body = _LEAD.sub("", line)
    if is_command(body):
        return True
    return len(_CODE_SPAN.sub(lambda m: m[0].replace(" ", "_"), body).split()) == 1


def block(text: str, label: str) -> list[str]:
    """The lines of the first ``Why:`` or ``Fix:`` block (up to the next label or blank)."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(f"   {label}: "))
    end = next(n for n in range(start + 1, len(lines))
               if not lines[n].strip() or not lines[n].startswith(" " * 8))
    return lines[start:end]


@pytest.mark.parametrize("columns", ["80", "200", None])
@pytest.mark.parametrize("log", LOGS)
def test_no_line_is_wider_than_the_terminal_but_an_unbreakable_one(
        log: str, columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    width = int(columns or 120)  # piped without COLUMNS: the width every report uses
    wide = [line for line in report(log, columns, monkeypatch).splitlines()
            if len(line) > width and not unbreakable(line)]
    assert not wide


@pytest.mark.parametrize("log", LOGS)
def test_why_and_fix_continue_under_their_text_and_lose_no_word(
        log: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_audit.explain import explain_sources

    text = report(log, "80", monkeypatch)
    incident = explain_sources([str(FIXTURES / log)], torch_version="2.4.1",
                               workers=1).incidents[0]
    for label, original in (("Why", incident.explanation), ("Fix", incident.remedy)):
        lines = block(text, label)
        assert len(lines) > 1  # each is longer than one line at 80 columns
        # under the text after "Why: " / "Fix: ", or after a list item's "- " or "1. "
        assert all(re.match(r"^ {8}(?: {2,3})?\S", line) for line in lines[1:])
        assert " ".join(" ".join(lines)[len(f"   {label}: "):].split()) == " ".join(
            original.split())


def test_the_quoted_log_line_continues_under_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = report("a100_fragmented_oom_torch23.log", "80", monkeypatch).splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("   > "))
    assert lines[start + 1].startswith("     ") and lines[start + 1][5] != " "
    assert "torch.OutOfMemoryError: CUDA out of memory." in lines[start]


def test_a_list_item_continues_under_the_item_text(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = report("a100_fragmented_oom_torch23.log", "80", monkeypatch).splitlines()
    item = next(n for n, line in enumerate(lines) if line.startswith("        - lower the"))
    assert lines[item + 1].startswith(" " * 10) and lines[item + 1][10] != " "


def test_a_long_remedy_command_is_printed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # From torch 2.10 on, the remedy sets both names of the variable: 105 characters.
    text = report("a100_fragmented_oom_torch23.log", "80", monkeypatch, "2.10.0")
    assert ("   Fix: export PYTORCH_ALLOC_CONF='expandable_segments:True' "
            "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'\n") in text


def test_a_command_quoted_in_a_sentence_stays_on_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = report("qodo_encoder_nvml_assert.log", "80", monkeypatch).splitlines()
    for command in ("`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe "
                    "nvidia`", "`sudo apt-mark hold 'nvidia-*' 'libnvidia-*'`"):
        assert any(command in line for line in lines), command


def test_a_step_ending_in_a_semicolon_is_a_sentence_that_wraps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = report("ddp8_rank3_illegal_access_nccl_timeouts.log", "80", monkeypatch).splitlines()
    step = next(n for n, line in enumerate(lines) if "switch off custom or compiled" in line)
    assert len(lines[step]) <= 80 and lines[step + 1].startswith(" " * 8)


def _incident(**text: str) -> Incident:
    fields = {"explanation": "why", "remedy": "fix", "excerpt": "line", "title": "title"}
    fields.update(text)
    return Incident(cls="cuda-oom", signature="cuda-oom/x", severity=Severity.ERROR,
                    role="root-cause", line_numbers=[1], numbers={}, count=1,
                    locations=[Location("a.log", 1)], **fields)


def _render(incident: Incident, width: int) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    render_terminal(ExplainResult([incident], [InputStats("a.log", 10, 1)]),
                    Console(file=buffer, width=width, no_color=True), fail_on=Severity.ERROR)
    return buffer.getvalue()


def test_wrapping_never_starts_a_line_with_a_workflow_command() -> None:
    # "::error" is in the middle of the text, then wrapping would put it first on a line.
    text = _render(_incident(explanation="word " * 14 + "::error ::owned",
                             excerpt="x " * 37 + "::warning ::owned"), 80)
    assert "::error ::owned" in text.replace("\u200b", "")
    assert not [line for line in text.splitlines() if re.match(r"^\s*::", line)]


def test_quoted_log_text_is_escaped_as_before_and_brackets_stay_text() -> None:
    excerpt = "[rank7]:[red]bold[/red] " + "word " * 20 + "\x1b[2J end"
    text = _render(_incident(excerpt=excerpt), 80)
    joined = " ".join(line.strip() for line in text.splitlines())
    assert "[rank7]:[red]bold[/red]" in joined and "\\x1b[2J end" in joined
    assert "\x1b" not in text


def test_the_width_comes_from_columns_in_the_command(cli_env: dict) -> None:
    log = str(FIXTURES / "a100_fragmented_oom_torch23.log")
    outputs = {}
    for columns in ("80", "200"):
        env = {**cli_env, "COLUMNS": columns}
        done = subprocess.run([sys.executable, "-m", "gpu_audit", "explain", log], env=env,
                              capture_output=True, timeout=120)
        outputs[columns] = done.stdout.decode()
        assert max(len(line) for line in outputs[columns].splitlines()
                   if not unbreakable(line)) <= int(columns)
        documents = subprocess.run([sys.executable, "-m", "gpu_audit", "explain", log,
                                    "--json"], env=env, capture_output=True, timeout=120)
        outputs[columns + "json"] = json.loads(documents.stdout)["incidents"]
    assert outputs["80"] != outputs["200"]
    assert outputs["80json"] == outputs["200json"]  # the document does not depend on width
