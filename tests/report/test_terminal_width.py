"""The scan in an 80- and a 200-column terminal: nothing folds inside a word, commands are cut
between whole arguments, and every fix pastes as the command it is."""

from __future__ import annotations

import io
import shlex

import pytest
from rich.console import Console

from gpu_audit.config import load_policy
from gpu_audit.model import Finding, Severity
from gpu_audit.report.terminal import render_findings, render_scan
from gpu_audit.rules import evaluate
from tests.builders import gpu, gtx1650_three_uvicorn, process, scan
from tests.report.pasting import pasted_commands, same_command

SRV = "/srv/api/.venv/bin/python3"


def rendered(scanned, width: int, findings=None) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True, highlight=False, soft_wrap=False)
    render_scan(scanned, findings or [], 0, console=console)
    return out.getvalue()


def servers():
    argv = [SRV, "-m", "uvicorn", "app.main:app", "--host", "0.0.0.0", "--workers", "1"]
    return scan(processes=[
        process(4100 + i, 154, [*argv, "--port", str(port)], name="python3", listen_ports=[port],
                user="root")
        for i, port in enumerate((8000, 8080, 3001))
    ], gpus=[gpu(0, persistence_mode=False, pci_bus_id="00000000:3B:00.0")])


def eight_ranks():
    train = ["/opt/conda/envs/llm/bin/python", "/home/alice/llm/train.py", "--config",
             "configs/llama-70b.yaml", "--deepspeed", "ds_zero3.json"]
    return scan(
        gpus=[gpu(i, pci_bus_id=f"00000000:{0x18 + 16 * i:02X}:00.0") for i in range(8)],
        processes=[process(5000 + i, 61_000, [*train, f"--local-rank={i}"], gpu_index=i)
                   for i in range(8)])


def table_lines(text: str, title: str) -> list[str]:
    """The lines of the table under ``title``: its header, rule and rows."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith(title)) + 1
    while not lines[i].strip():
        i += 1
    body = []
    while i < len(lines) and lines[i].strip():
        body.append(lines[i])
        i += 1
    return body


@pytest.mark.parametrize("width", [80, 200])
def test_every_line_fits_and_every_process_takes_one_line(width):
    text = rendered(servers(), width)
    assert max(len(line) for line in text.splitlines()) <= width
    rows = [line for line in table_lines(text, "GPU processes") if line.lstrip()[:1].isdigit()]
    assert len(rows) == 3  # one line per process: the command never wraps
    rule = next(i for i, line in enumerate(table_lines(text, "GPU processes")) if "──" in line)
    assert table_lines(text, "GPU processes")[rule + 1:] == rows


def test_at_80_columns_commands_keep_their_module_and_port():
    text = rendered(servers(), 80)
    for port in (8000, 8080, 3001):
        row = next(line for line in text.splitlines() if f"--port {port}" in line)
        assert "uvicorn" in row and "…" in row
        assert row.rstrip().endswith(f"--port {port}")
    assert "persistence off" in text  # state words are never folded
    assert "persiste\n" not in text and "nce off" not in text.replace("persistence off", "")
    assert "/srv/api/.venv/bi" not in text


def test_at_200_columns_the_whole_command_shows():
    text = rendered(servers(), 200)
    whole = f"{SRV} -m uvicorn app.main:app --host 0.0.0.0 --workers 1 --port 8000"
    assert whole in text


@pytest.mark.parametrize("width", [80, 200])
def test_distributed_ranks_keep_their_local_rank_and_gpus_their_bus_id(width):
    text = rendered(eight_ranks(), width)
    for i in range(8):
        assert f"--local-rank={i}" in text
        assert f"{0x18 + 16 * i:02x}:00.0" in text
    assert "Bus id" in text
    assert max(len(line) for line in text.splitlines()) <= width


def test_the_laptop_with_three_servers_reads_at_80_columns():
    scanned = gtx1650_three_uvicorn()
    findings = evaluate(scanned, load_policy(None, search=False, environ={}))
    text = rendered(scanned, 80, findings)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "uvicorn … --port 8000" in text or "uvicorn app:app … --port 8000" in text


REMEDIES = [
    "pip install --force-reinstall 'torch==2.13.0' --index-url "
    "https://download.pytorch.org/whl/cu130  # check at https://pytorch.org/get-started/locally/"
    " that cu130 exists for it",
    "export PYTORCH_ALLOC_CONF='expandable_segments:True' "
    "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'",
    "ps -o pid,lstart,args -p 18058 18059 18060  # confirm which copies are stale, then: "
    "kill 18059 18060",
    "sudo systemctl enable --now nvidia-persistenced  # or: sudo nvidia-smi -pm 1",
]


@pytest.mark.parametrize("width", [80, 200])
def test_every_remedy_command_pastes_whole(width):
    findings = [Finding(id=f"r{i}", severity=Severity.WARNING, subject="host", title="t",
                        detail="d", remedy=remedy) for i, remedy in enumerate(REMEDIES)]
    out = io.StringIO()
    render_findings(Console(file=out, width=width, no_color=True, highlight=False), findings)
    pasted = pasted_commands(out.getvalue())
    assert len(pasted) == len(REMEDIES)
    for command, remedy in zip(pasted, REMEDIES, strict=True):
        assert same_command(command, remedy), (command, remedy)
        shlex.split(command)
    if width == 200:  # room enough: each remedy is printed as it is, on one line
        for remedy in REMEDIES:
            assert remedy in out.getvalue()
    for line in out.getvalue().splitlines():
        assert not line.rstrip().endswith(("--index-url", "-p", "--host"))


def test_a_sentence_remedy_wraps_as_text_under_its_label():
    finding = Finding(id="x", severity=Severity.INFO, subject="gpu:0", title="t", detail="d",
                      remedy="Nothing to fix: consumer (GeForce, TITAN) GPUs do not have these "
                             "readings, and that is how the driver reports them")
    out = io.StringIO()
    render_findings(Console(file=out, width=80, no_color=True), [finding])
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.startswith("         fix: Nothing to fix") for line in lines)
    assert "\\" not in out.getvalue()


@pytest.mark.parametrize("width", [60, 70, 80, 110])
def test_a_command_quoted_in_a_sentence_stays_on_one_line(width):
    quoted = "`sudo nvidia-smi --gpu-reset -i 1`"
    finding = Finding(id="x", severity=Severity.ERROR, subject="gpu:1", title="t", detail="d",
                      remedy="Check the kernel log for Xid errors and whether nvidia-smi also "
                             f"hangs. If it persists, {quoted} with no process on it, or reboot")
    out = io.StringIO()
    render_findings(Console(file=out, width=width, no_color=True, highlight=False), [finding])
    lines = out.getvalue().splitlines()
    assert any(quoted in line for line in lines), lines
    assert all(len(line) <= width for line in lines)
    assert "If it persists," in out.getvalue() and "or reboot" in out.getvalue()


def test_brackets_in_a_remedy_are_text_not_markup():
    finding = Finding(id="x", severity=Severity.WARNING, subject="host", title="t", detail="d",
                      remedy="Install the build for your CUDA ([cu124] wheels) and set "
                             "[bold]nothing[/bold] else")
    out = io.StringIO()
    render_findings(Console(file=out, width=80, no_color=True, highlight=False), [finding])
    assert "([cu124] wheels)" in out.getvalue() and "[bold]nothing[/bold]" in out.getvalue()
