"""scan and check as a node's monitoring sees them: a node_exporter textfile, a Nagios check,
and a report folder that does not fill the disk. Real processes, the fake NVML."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

from tests import builders as b
from tests.cli.test_check_cli import saved_scan
from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]

parser = pytest.importorskip("prometheus_client.parser")

STATUS = re.compile(r"^GPU-AUDIT (OK|WARNING|CRITICAL|UNKNOWN) - [^|\n]+( \| [^\n]+)?$")


def gpu_audit(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def families(path: Path) -> dict[str, list]:
    return {f.name: list(f.samples)
            for f in parser.text_string_to_metric_families(path.read_text())}


def test_the_textfile_joins_with_dcgm_series(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(2), base=cli_env)
    textfile_dir = tmp_path / "textfile"
    textfile_dir.mkdir()
    prom = textfile_dir / "gpu_audit.prom"
    done = gpu_audit("scan", "--prometheus", str(prom), "--no-report", env=env, cwd=tmp_path)
    assert done.returncode in (0, 1, 2), done.stderr  # findings depend on the torch installed
    metrics = families(prom)
    (success,) = metrics["gpu_audit_scan_success"]
    assert success.value == 1
    (status,) = metrics["gpu_audit_scan_status"]
    assert status.value == done.returncode
    gpus = {s.labels["gpu"]: s.labels for s in metrics["gpu_audit_duplicate_backend_memory_bytes"]}
    assert set(gpus) == {"0", "1"}
    # The DCGM exporter's label names and value formats, as NVML reports the GPUs.
    assert gpus["1"]["UUID"] == "GPU-00000001-a1b2-4c3d-8e9f-0123456789ab"
    assert gpus["1"]["pci_bus_id"] == "00000000:2A:00.0"
    assert gpus["1"]["modelName"] == "NVIDIA H100 80GB HBM3"
    assert gpus["1"]["Hostname"] == gpus["1"]["hostname"] == success.labels["hostname"] != ""
    # Readable by node_exporter's own user; no temporary file left beside it.
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644
    assert [p.name for p in textfile_dir.iterdir()] == ["gpu_audit.prom"]


def test_a_scrape_never_sees_half_a_textfile(cli_env, tmp_path):
    procs = [b.process(7000 + i, 64, ["python", f"w{i}.py"], user=f"user{i}") for i in range(40)]
    saved = saved_scan(tmp_path, b.scan(gpus=[b.gpu(0, used=40 * 64 * b.MIB + 300 * b.MIB)],
                                        processes=procs))
    prom = tmp_path / "gpu_audit.prom"
    prom.write_text("# an older scan's file\n")
    seen: list[str] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            seen.append(prom.read_text())

    reader = threading.Thread(target=scrape)
    reader.start()
    try:
        for _ in range(4):
            done = gpu_audit("scan", "--from", str(saved), "--prometheus", str(prom),
                             "--no-report", env=cli_env, cwd=tmp_path)
            assert done.returncode in (0, 1), done.stderr
    finally:
        stop.set()
        reader.join()
    complete = [text for text in seen if text != "# an older scan's file\n"]
    assert complete, "the reader never saw the new file"
    for text in set(complete):
        assert text.endswith("\n") and "gpu_audit_scan_success" in text
        assert 'user="user39"' in text  # the last series of the file is there: all of it is
        list(parser.text_string_to_metric_families(text))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("where", ["missing-folder/gpu_audit.prom", "a-folder"])
def test_a_textfile_path_that_cannot_be_written_is_a_one_line_error(cli_env, tmp_path, where):
    (tmp_path / "a-folder").mkdir()
    saved = saved_scan(tmp_path, b.scan())
    done = gpu_audit("scan", "--from", str(saved), "--prometheus", str(tmp_path / where),
                     "--no-report", env=cli_env, cwd=tmp_path)
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-audit: "), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "missing-folder").exists()


def test_a_scan_that_cannot_judge_still_writes_success_0(cli_env, tmp_path):
    (tmp_path / "gpu-audit.toml").write_text("min_free_vram_pct = 250\n")
    prom = tmp_path / "gpu_audit.prom"
    done = gpu_audit("scan", "--prometheus", str(prom), "--format", "nagios", "--no-report",
                     env=cli_env, cwd=tmp_path)
    assert done.returncode == 3
    (first,) = done.stdout.splitlines()
    assert first.startswith("GPU-AUDIT UNKNOWN - ") and "min_free_vram_pct" in first
    metrics = families(prom)
    assert metrics["gpu_audit_scan_success"][0].value == 0
    assert metrics["gpu_audit_scan_status"][0].value == 3


@pytest.mark.parametrize("command", ["scan", "check"])
def test_nagios_format_puts_the_status_line_first_and_keeps_the_exit_code(cli_env, tmp_path,
                                                                         command):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    plain = gpu_audit(command, "--from", str(saved), "--no-report", env=cli_env, cwd=tmp_path)
    nagios = gpu_audit(command, "--from", str(saved), "--no-report", "--format", "nagios",
                       env=cli_env, cwd=tmp_path)
    assert nagios.returncode == plain.returncode and plain.returncode in (1, 2)
    first, *rest = nagios.stdout.splitlines()
    assert STATUS.match(first), first
    state = {1: "WARNING", 2: "CRITICAL"}[nagios.returncode]
    assert first.startswith(f"GPU-AUDIT {state} - ") and "duplicate" in first
    assert rest and all("|" not in line for line in rest)


def test_json_and_nagios_cannot_be_combined(cli_env, tmp_path):
    done = gpu_audit("check", "--json", "--format", "nagios", "--no-report", env=cli_env,
                     cwd=tmp_path)
    assert done.returncode == 3 and "cannot be combined" in done.stderr
    assert done.stdout.startswith("GPU-AUDIT UNKNOWN - ")


def saved_at(tmp_path: Path, name: str, generated_at: str) -> Path:
    return saved_scan(tmp_path, msgspec.structs.replace(b.scan(), generated_at=generated_at), name)


def test_two_scans_in_the_same_second_keep_both_reports(cli_env, tmp_path):
    env = {**cli_env, "GPU_AUDIT_KEEP_REPORTS": "1"}
    out = tmp_path / "reports"
    old = saved_at(tmp_path, "old.json", "2026-11-22T09:00:00Z")
    assert gpu_audit("scan", "--from", str(old), "--out", str(out), env=env,
                     cwd=tmp_path).returncode == 0
    same = saved_at(tmp_path, "same.json", "2026-11-22T10:00:00Z")
    procs = [subprocess.Popen([sys.executable, "-m", "gpu_audit", "scan", "--from", str(same),
                               "--out", str(out)], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    names = sorted(p.name for p in out.iterdir())
    # The older report went; the four of the same second all stay, each with its twin.
    assert len(names) == 8 and all("T100000Z" in n for n in names), names
    newer = saved_at(tmp_path, "newer.json", "2026-11-22T11:00:00Z")
    assert gpu_audit("scan", "--from", str(newer), "--out", str(out), env=env,
                     cwd=tmp_path).returncode == 0
    assert sorted(p.suffix for p in out.iterdir()) == [".json", ".md"]
    (other := out / "notes.md").write_text("mine")
    assert gpu_audit("check", "--from", str(newer), "--out", str(out), env=env,
                     cwd=tmp_path).returncode in (0, 1, 2)
    assert other.read_text() == "mine" and len(list(out.glob("scan-*"))) == 2


def test_no_report_still_writes_nothing(cli_env, tmp_path):
    saved = saved_at(tmp_path, "s.json", "2026-11-22T09:00:00Z")
    done = gpu_audit("scan", "--from", str(saved), "--no-report", env=cli_env, cwd=tmp_path)
    assert done.returncode == 0 and not (tmp_path / "reports").exists()
    assert os.listdir(tmp_path) == ["s.json"]


def test_format_json_is_json_and_format_is_checked(cli_env, tmp_path):
    import json

    saved = saved_at(tmp_path, "s.json", "2026-11-22T09:00:00Z")
    done = gpu_audit("scan", "--from", str(saved), "--no-report", "--format", "json",
                     env=cli_env, cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["schema"] == "gpu-audit.scan/1"
    done = gpu_audit("scan", "--from", str(saved), "--no-report", "--format", "xml",
                     env=cli_env, cwd=tmp_path)
    assert done.returncode == 3 and "--format: unknown format 'xml'" in done.stderr
