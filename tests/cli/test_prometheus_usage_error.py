"""A command line typer refuses still replaces the ``--prometheus`` textfile with a failure
(success 0, status 3): a systemd timer with a bad flag must not leave the last run's healthy
file in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.test_monitoring_cli import families, gpu_audit

HEALTHY = "gpu_audit_scan_success 1\ngpu_audit_scan_status 0\n"


def value(metrics: dict, name: str) -> float:
    (sample,) = metrics[name]
    return sample.value


@pytest.fixture
def stale(tmp_path: Path) -> Path:
    folder = tmp_path / "textfile"
    folder.mkdir()
    prom = folder / "gpu.prom"
    prom.write_text(HEALTHY)
    return prom


@pytest.mark.parametrize("command", ["scan", "check"])
@pytest.mark.parametrize("spelling", ["split", "equals"])
def test_a_refused_line_writes_the_failure_textfile(cli_env, tmp_path, stale, command, spelling):
    given = (["--prometheus", str(stale)] if spelling == "split"
             else [f"--prometheus={stale}"])
    done = gpu_audit(command, *given, "--bad-flag", env=cli_env, cwd=tmp_path)
    assert done.returncode == 3
    assert "No such option: --bad-flag" in done.stderr and "Traceback" not in done.stderr
    metrics = families(stale)
    assert value(metrics, "gpu_audit_scan_success") == 0
    assert value(metrics, "gpu_audit_scan_status") == 3
    if command == "check":
        assert value(metrics, "gpu_audit_check_status") == 3
    assert oct(stale.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in stale.parent.iterdir()] == ["gpu.prom"]  # no temporary file left


def test_a_bad_value_elsewhere_on_the_line_writes_it_too(cli_env, tmp_path, stale):
    done = gpu_audit("scan", "--timeout", "nan", "--prometheus", str(stale), env=cli_env,
                     cwd=tmp_path)
    assert done.returncode == 3
    assert value(families(stale), "gpu_audit_scan_success") == 0


@pytest.mark.parametrize("args", [
    ["scan", "--bad-flag"],  # no --prometheus
    ["scan", "--bad-flag", "--", "--prometheus", "{prom}"],  # after --: not an option
    ["diff", "--prometheus", "{prom}"],  # a command without --prometheus
    ["scan", "--bad-flag", "--prometheus"],  # no file named
])
def test_lines_without_a_prometheus_file_leave_the_file_alone(cli_env, tmp_path, stale, args):
    done = gpu_audit(*[a.format(prom=stale) for a in args], env=cli_env, cwd=tmp_path)
    assert done.returncode == 3
    assert stale.read_text() == HEALTHY


def test_a_textfile_that_cannot_be_written_still_ends_in_the_usage_error(cli_env, tmp_path):
    missing = tmp_path / "no-such-folder" / "gpu.prom"
    done = gpu_audit("scan", "--prometheus", str(missing), "--bad-flag", env=cli_env,
                     cwd=tmp_path)
    assert done.returncode == 3
    assert "No such option: --bad-flag" in done.stderr and "Traceback" not in done.stderr
    assert not missing.parent.exists()
    assert os.listdir(tmp_path) == []
