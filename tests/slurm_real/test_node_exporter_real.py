"""gpu-audit's textfile under a real node_exporter (Debian's prometheus-node-exporter): its
textfile collector reads the folder gpu-audit writes, a scrape over loopback parses with
prometheus_client's parser, and ``promtool check metrics`` accepts it but for the one complaint
docs/slurm.md documents (DCGM's camelCase label ``modelName``, kept for joins).

Needs prometheus-node-exporter and promtool (package prometheus); .ci/run installs them as root.
Skipped, with the reason, where they are missing."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import fakegpu
from tests.fakegpu import GIB, h100_node
from tests.slurm_real.cluster import free_port

parser = pytest.importorskip("prometheus_client.parser")
fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml
EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")
# promtool's lint on DCGM's label name, which gpu-audit keeps so that on(modelName) joins work.
DOCUMENTED = "label names should be written in 'snake_case' not 'camelCase'"

pytestmark = pytest.mark.skipif(
    EXPORTER is None or PROMTOOL is None,
    reason="no node_exporter or promtool: apt-get install prometheus-node-exporter prometheus "
           "(.ci/run does, as root)")


@contextlib.contextmanager
def node_exporter(folder: Path) -> Iterator[str]:
    """node_exporter with only its textfile collector on ``folder``, on a free loopback port;
    yields its /metrics URL; stopped (by its pid) at the end."""
    port = free_port()
    process = subprocess.Popen(
        [EXPORTER, "--collector.disable-defaults", "--collector.textfile",
         f"--collector.textfile.directory={folder}", "--web.disable-exporter-metrics",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("node_exporter did not answer: " +
                                       process.stderr.read().decode(errors="replace")) from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def test_node_exporter_serves_gpu_audits_textfile(fake_nvml, cli_env, tmp_path):
    folder = tmp_path / "textfile"
    folder.mkdir()
    scenario = h100_node(2, pids=fakegpu.absent_pids(1), process_memory_bytes=4 * GIB)
    scenario["gpus"][1]["ecc_errors_uncorrected_volatile"] = 2
    env = fake_nvml(scenario, base=cli_env)
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--no-report",
                           "--prometheus", str(folder / "gpu_audit.prom")],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr  # the failing GPU
    with node_exporter(folder) as url:
        text = scrape(url)
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    errors = families["node_textfile_scrape_error"].samples
    assert [s.value for s in errors] == [0.0], text[:2000]
    ours = {name: f for name, f in families.items() if name.startswith("gpu_audit_")}
    assert "gpu_audit_scan_success" in ours and len(ours) >= 10, sorted(families)
    per_gpu = [s for f in ours.values() for s in f.samples if s.labels.get("gpu")]
    assert {s.labels["gpu"] for s in per_gpu} == {"0", "1"}
    assert all(s.labels["UUID"].startswith("GPU-") and s.labels["modelName"]
               for s in per_gpu)

    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    complaints = [line for line in (lint.stdout + lint.stderr).splitlines() if line.strip()]
    assert lint.returncode in (0, 3), lint.stderr  # 3: lint complaints only, no parse error
    assert all(DOCUMENTED in line and "gpu_audit_" in line for line in complaints), complaints
    docs = (Path(__file__).resolve().parents[2] / "docs" / "slurm.md").read_text()
    assert DOCUMENTED in docs
