"""diag's reports do not pile up: ``keep_reports`` (default 50 per command) keeps the newest diag
reports in the folder, their level-3 plots go with them, and nothing else is touched."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.diag.plots import PLOT_ENDINGS
from gpu_audit.report.files import prune_reports, report_stem
from tests import fakegpu
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml


def make(folder: Path, command: str, second: int, plots: tuple[int, ...] = (),
         host: str = "node1") -> str:
    stem = report_stem(command, f"2026-11-22T10:00:{second:02d}Z", host, "p100")
    (folder / f"{stem}.md").write_text("md")
    (folder / f"{stem}.json").write_text("{}")
    for index in plots:
        (folder / f"{stem}-gpu{index}.png").write_bytes(b"\x89PNG")
    return stem


def test_old_diag_reports_go_with_their_plots(tmp_path) -> None:
    host = "node-gpu0"  # a host named like a plot
    old = make(tmp_path, "diag", 1, plots=(0, 1), host=host)
    tricky = make(tmp_path, "diag", 2, plots=(3,), host=host)
    newest = make(tmp_path, "diag", 3, plots=(7,), host=host)
    scan = make(tmp_path, "scan", 0)
    (tmp_path / "diag-notes-gpu0.png").write_bytes(b"mine")
    deleted = prune_reports(tmp_path, "diag", 1, host=host, companions=PLOT_ENDINGS)
    assert sorted(p.name for p in deleted) == sorted(
        [f"{old}.md", f"{old}.json", f"{old}-gpu0.png", f"{old}-gpu1.png",
         f"{tricky}.md", f"{tricky}.json", f"{tricky}-gpu3.png"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{newest}.md", f"{newest}.json", f"{newest}-gpu7.png", f"{scan}.md", f"{scan}.json",
         "diag-notes-gpu0.png"])


def test_diag_prunes_its_reports_after_writing(fake_nvml, cli_env, tmp_path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "r"
    out.mkdir()
    here = socket.gethostname()  # retention counts this host's reports
    olds = [make(out, "diag", s, plots=(0,), host=here) for s in range(3)]
    scans = [make(out, "scan", s) for s in range(3)]
    link = out / "diag-20261122T090000Z-p1-node1.md"
    link.symlink_to(tmp_path / "elsewhere.md")
    env = fake_nvml(h100_node(1), base={**cli_env, "GPU_AUDIT_KEEP_REPORTS": "2"})
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu",
                           "--level", "1", "--out", str(out)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in out.iterdir())
    written = [n for n in names if n.startswith("diag-") and not n.startswith(tuple(olds))
               and n != link.name]
    assert len(written) == 2 and {Path(n).suffix for n in written} == {".md", ".json"}
    # The new report and the newest old one stay; the two older ones went with their plots.
    assert [s for s in olds if (out / f"{s}.md").exists()] == [olds[2]]
    assert (out / f"{olds[2]}-gpu0.png").exists()
    assert not any((out / f"{s}-gpu0.png").exists() for s in olds[:2])
    assert all((out / f"{s}.md").exists() for s in scans)  # another command's reports
    assert link.is_symlink()


def test_a_bad_keep_reports_stops_diag_before_it_starts(fake_nvml, cli_env, tmp_path) -> None:
    env = fake_nvml(h100_node(1), base={**cli_env, "GPU_AUDIT_KEEP_REPORTS": "many"})
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu",
                           "--out", str(tmp_path)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "KEEP_REPORTS" in done.stderr.upper()
    assert "Traceback" not in done.stderr and "import-torch" not in done.stderr
