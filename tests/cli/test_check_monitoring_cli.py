"""check as a node's monitoring sees it: ``check --prometheus FILE`` (the scan's series plus the
check's verdict), and a Nagios status line even for a command line typer refuses."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests import builders as b
from tests.cli.test_check_cli import saved_scan
from tests.cli.test_monitoring_cli import STATUS, families, gpu_audit
from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]


@pytest.mark.parametrize(("command", "args", "reason"), [
    ("scan", ["--bogus"], "No such option: --bogus"),
    ("check", ["--bogus"], "No such option: --bogus"),
    # typer 0.29 words a value out of range its own way (and checks the range before finiteness)
    ("check", ["--diag", "4"], ("Invalid value for '--diag': 4 is not in the range 1<=x<=3.",
                                "Invalid value for '--diag': Input should be less than or equal "
                                "to 3")),
    ("scan", ["--timeout", "nan"], ("Invalid value for '--timeout': 'nan'",
                                    "Invalid value for '--timeout': Input should be less than or "
                                    "equal to 86400")),
    ("check", ["--timeout"], "Option '--timeout' requires an argument."),
    ("check", ["extra"], "Got unexpected extra argument(s) (extra)"),
    ("scan", ["--json=1"], "Option '--json' does not take a value."),
])
@pytest.mark.parametrize("nagios", [["--format", "nagios"], ["--format=Nagios"]])
def test_a_refused_command_line_still_gives_nagios_a_status_line(cli_env, tmp_path, command,
                                                                  args, reason, nagios):
    done = gpu_audit(command, *nagios, *args, env=cli_env, cwd=tmp_path)
    assert done.returncode == 3
    (line,) = done.stdout.splitlines()  # one line: no long output, nothing else on stdout
    assert STATUS.match(line), line
    reasons = reason if isinstance(reason, tuple) else (reason,)
    assert line.startswith("GPU-AUDIT UNKNOWN - usage error: ")
    assert any(text in line for text in reasons), line
    assert "Error: " in done.stderr and "Traceback" not in done.stderr  # typer's usual message


@pytest.mark.parametrize("args", [
    ["check", "--bogus"],  # no --format nagios
    ["check", "--format", "json", "--bogus"],
    ["check", "--format", "nagios", "--format", "json", "--bogus"],  # the last one counts
    ["diff", "--format", "nagios"],  # a command without --format
    ["check", "--bogus", "--", "--format", "nagios"],
])
def test_other_refused_lines_keep_stdout_empty(cli_env, tmp_path, args):
    done = gpu_audit(*args, env=cli_env, cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == ""
    assert "Error: " in done.stderr


def test_check_writes_the_textfile_with_its_verdict(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(2), base=cli_env)
    textfile_dir = tmp_path / "textfile"
    textfile_dir.mkdir()
    prom = textfile_dir / "gpu_audit_check.prom"
    done = gpu_audit("check", "--prometheus", str(prom), "--no-report", "--format", "nagios",
                     env=env, cwd=tmp_path)
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    metrics = families(prom)
    assert metrics["gpu_audit_scan_success"][0].value == 1
    (status,) = metrics["gpu_audit_check_status"]
    assert status.value == done.returncode and status.labels["hostname"] != ""
    # The scan's series, DCGM join labels included.
    gpus = {s.labels["gpu"] for s in metrics["gpu_audit_duplicate_backend_memory_bytes"]}
    assert gpus == {"0", "1"}
    passed = metrics["gpu_audit_check_passed"]
    assert passed and {s.value for s in passed} <= {0, 1}
    assert {"id", "subject", "gpu", "UUID", "Hostname"} <= set(passed[0].labels)
    counts = {s.labels["status"]: s.value for s in metrics["gpu_audit_checks"]}
    assert set(counts) == {"pass", "warn", "fail", "skip", "unknown"}
    assert counts["pass"] >= 1 and all(value >= 0 for value in counts.values())
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644
    assert [p.name for p in textfile_dir.iterdir()] == [prom.name]


def test_a_failing_check_is_passed_0_labelled_by_check_id(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan(gpus=[b.gpu(0)]))
    policy = tmp_path / "policy.toml"
    policy.write_text("min_gpus = 4\n")
    prom = tmp_path / "check.prom"
    done = gpu_audit("check", "--from", str(saved), "--policy", str(policy), "--prometheus",
                     str(prom), "--no-report", "--json", env=cli_env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    metrics = families(prom)
    assert metrics["gpu_audit_check_status"][0].value == 2
    by_id = {s.labels["id"]: s.value for s in metrics["gpu_audit_check_passed"]}
    assert by_id["gpu-count"] == 0
    assert any(value == 1 for value in by_id.values())
    text = prom.read_text()
    assert "pid=" not in text and "cmdline" not in text


def test_a_check_that_cannot_judge_still_writes_success_0(cli_env, tmp_path):
    prom = tmp_path / "check.prom"
    done = gpu_audit("check", "--from", str(tmp_path / "missing.json"), "--prometheus",
                     str(prom), "--format", "nagios", "--no-report", env=cli_env, cwd=tmp_path)
    assert done.returncode == 3
    assert done.stdout.startswith("GPU-AUDIT UNKNOWN - ")
    metrics = families(prom)
    assert metrics["gpu_audit_scan_success"][0].value == 0
    assert metrics["gpu_audit_check_status"][0].value == 3
    assert metrics.get("gpu_audit_check_passed", []) == []


@pytest.mark.parametrize("where", ["missing-folder/check.prom", "a-folder"])
def test_a_textfile_path_that_cannot_be_written_fails_before_the_verdict(cli_env, tmp_path,
                                                                         where):
    (tmp_path / "a-folder").mkdir()
    saved = saved_scan(tmp_path, b.scan())
    done = gpu_audit("check", "--from", str(saved), "--prometheus", str(tmp_path / where),
                     "--no-report", "--json", env=cli_env, cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-audit: "), done.stderr
    assert not (tmp_path / "missing-folder").exists()


def test_slurm_hooks_write_no_textfile(cli_env, tmp_path: Path):
    saved = saved_scan(tmp_path, b.scan())
    done = gpu_audit("check", "--slurm", "healthcheck", "--from", str(saved), "--prometheus",
                     str(tmp_path / "check.prom"), env=cli_env, cwd=tmp_path)
    assert done.returncode == 3 and "drop --prometheus" in done.stderr
