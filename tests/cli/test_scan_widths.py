"""``scan`` and ``check`` as a person sees them in an 80- and a 200-column terminal, on the fake
laptop with three copies of one server and on a busy 8xH100 node: commands are cut between
whole arguments, nothing folds inside a word, and every fix pastes as the command it is."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakegpu import gtx1650_laptop, h100_node
from tests.procs import install_program, running, uvicorn_argvs
from tests.report.pasting import pasted_commands, same_command

pytest_plugins = ["tests.fakegpu"]


def run(env: dict, cwd: Path, *args: str, columns: int) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "gpu_audit", *args], capture_output=True,
                            text=True, env={**env, "COLUMNS": str(columns)}, cwd=cwd,
                            timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def laptop(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    uvicorn = install_program(bin_dir, "uvicorn")
    argvs = uvicorn_argvs(uvicorn, [8000, 8080, 3001])
    argvs.append([str(install_program(bin_dir, "gpu_daemon")), "--interval", "5"])
    argvs.append([str(install_program(bin_dir, "Xorg")), "vt2", "-displayfd", "3"])
    return argvs


def remedies(doc: dict) -> list[str]:
    """Every remedy line that is a command, from a scan's JSON document."""
    from gpu_audit.report.remedy import is_command

    return [line for f in doc["findings"] for line in f["remedy"].splitlines()
            if is_command(line)]


@pytest.mark.parametrize("columns", [80, 200])
def test_laptop_with_three_servers(fake_nvml, cli_env, tmp_path, columns):
    with running(laptop(tmp_path)) as pids:
        env = fake_nvml(gtx1650_laptop(uvicorn_pids=pids[:3], daemon_pid=pids[3],
                                       xorg_pid=pids[4]), base=cli_env)
        shown = run(env, tmp_path, "scan", "--no-report", columns=columns)
        doc = json.loads(run(env, tmp_path, "scan", "--json", "--no-report",
                             columns=columns).stdout)
        check = run(env, tmp_path, "check", "--no-report", columns=columns)
    text = shown.stdout
    for port in (8000, 8080, 3001):
        (row,) = [line for line in text.splitlines() if f"--port {port}" in line]
        assert "uvicorn" in row
    assert "01:00.0" in text and "persistence off" in text
    assert "persiste\n" not in text
    # A process takes one line: no row of the process table is a bare continuation.
    assert not any(line.strip() in ("n", "corn", "/bin/pytho") for line in text.splitlines())
    if columns == 200:
        assert "app:app --host 127.0.0.1 --port 8000" in text
    # Every fix pastes as the command the finding carries, in scan and in check.
    expected = remedies(doc)
    assert expected
    pasted = pasted_commands(text)
    for remedy in expected:
        assert any(same_command(p, remedy) for p in pasted), (remedy, pasted)
    stop = f"ps -o pid,lstart,args -p {pids[0]} {pids[1]} {pids[2]}"
    check_pasted = pasted_commands(check.stdout)
    assert any(same_command(p, stop) for p in check_pasted), check_pasted
    for command in check_pasted:
        shlex.split(command)
        assert not command.rstrip().endswith(("-p", "--index-url", "--host"))
    (dup,) = [f for f in doc["findings"] if f["id"] == "duplicate-backend"]
    assert "--host 127.0.0.1`" in dup["detail"]  # a flag is never cut from its value
    assert "--host`" not in dup["detail"]


@pytest.mark.parametrize("columns", [80, 200])
def test_eight_h100_ranks(fake_nvml, cli_env, tmp_path, columns):
    train = install_program(tmp_path / "bin", "train")
    ranks = [[str(train), "--config", "llama.yaml", f"--local-rank={i}"] for i in range(8)]
    with running(ranks) as pids:
        env = fake_nvml(h100_node(8, pids=pids), base=cli_env)
        shown = run(env, tmp_path, "scan", "--no-report", columns=columns)
    text = shown.stdout
    for i in range(8):
        assert f"--local-rank={i}" in text
    for bus in ("18:00.0", "db:00.0"):
        assert bus in text
    table = text[text.index("GPU processes"):text.index("Findings")]
    assert len([line for line in table.splitlines() if "--local-rank=" in line]) == 8
