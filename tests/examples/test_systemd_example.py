"""The systemd example works as written: its ExecStart runs here against a fake GPU node and
leaves the textfile node_exporter reads; the units pass ``systemd-analyze verify`` where it is
installed."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakegpu
from tests.fakegpu import h100_node

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "examples" / "systemd"
SERVICE = UNITS / "gpu-audit-metrics.service"
TIMER = UNITS / "gpu-audit-metrics.timer"
BINARY = "/usr/local/bin/gpu-audit"
TEXTFILE = "/var/lib/node_exporter/textfile_collector/gpu_audit.prom"
fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

parser = pytest.importorskip("prometheus_client.parser")


def settings(unit: Path) -> dict[str, str]:
    """``Key=value`` lines of a unit file (sections flattened; these units repeat no key)."""
    pairs = [line.split("=", 1) for line in unit.read_text().splitlines()
             if "=" in line and not line.lstrip().startswith(("#", ";"))]
    keys = [key for key, _ in pairs]
    assert len(keys) == len(set(keys)), keys
    return dict(pairs)


def test_the_service_writes_the_textfile_and_its_exit_codes_do_not_fail_the_unit(
        fake_nvml, cli_env, tmp_path):
    service = settings(SERVICE)
    argv = shlex.split(service["ExecStart"])
    assert argv[0] == BINARY and TEXTFILE in argv and "--no-report" in argv
    assert service["ReadWritePaths"] == str(Path(TEXTFILE).parent)
    textfile = tmp_path / "gpu_audit.prom"
    argv = [sys.executable, "-m", "gpu_audit",
            *(str(textfile) if arg == TEXTFILE else arg for arg in argv[1:])]
    env = fake_nvml(h100_node(2), base=cli_env)
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    ok = {0, *map(int, service["SuccessExitStatus"].split())}
    assert done.returncode in ok and ok == {0, 1, 2}, done.stderr
    assert done.stdout.startswith("GPU-AUDIT ")
    metrics = {f.name: f.samples for f in
               parser.text_string_to_metric_families(textfile.read_text())}
    assert metrics["gpu_audit_scan_success"][0].value == 1
    assert not (tmp_path / "reports").exists()  # no reports pile up on the node


def test_the_timer_runs_the_service_periodically():
    timer = settings(TIMER)
    assert timer["OnUnitActiveSec"] == "5min" and timer["WantedBy"] == "timers.target"
    # The staleness alert in its comment allows for three missed runs.
    assert "time() - gpu_audit_scan_timestamp_seconds > 900" in TIMER.read_text()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze absent")
def test_systemd_accepts_the_units(tmp_path):
    for unit in (SERVICE, TIMER):
        text = unit.read_text().replace(BINARY, f"{sys.executable} -m gpu_audit")
        (tmp_path / unit.name).write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", *(str(tmp_path / u.name)
                                                         for u in (SERVICE, TIMER))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
