"""``gpu-audit merge`` and ``gpu-audit fleet`` keep the newest ``keep_reports`` reports, with the
per-GPU tables and heat map beside each, and touch nothing else in the folder."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gpu_audit.fleet.render import BESIDE_REPORT
from gpu_audit.report.files import report_stem
from tests.fleet.synth import node_document, write_documents
from tests.fleet.test_merge_cli import gpu_audit

ENDINGS = (".md", ".json", *BESIDE_REPORT)


def old_report(folder: Path, command: str, second: int, pid: int = 100) -> str:
    """A fleet report of an earlier run on this host: markdown, JSON twin, tables, heat map."""
    stem = report_stem(command, f"2026-11-22T10:00:{second:02d}Z", socket.gethostname(),
                       f"p{pid}")
    for ending in ENDINGS:
        (folder / f"{stem}{ending}").write_text("old")
    return stem


def stems(folder: Path, command: str) -> set[str]:
    return {p.name.split(".")[0].removesuffix("-gpus").removesuffix("-heatmap")
            for p in folder.iterdir() if p.name.startswith(f"{command}-")}


def others(folder: Path) -> list[Path]:
    """Files retention must leave alone: another command's report, a look-alike, notes."""
    names = [f"{report_stem('scan', '2026-11-22T09:00:00Z', 'head', 'p1')}.md",
             "merge-notes.md", "merge-20261122T100000Z-p1-head-gpus.txt",
             "merge-20261122T100000Z-head-gpus.csv"]
    for name in names:
        (folder / name).write_text("keep me")
    return [folder / name for name in names]


def test_merge_keeps_the_newest_reports_and_deletes_tables_with_them(tmp_path, cli_env):
    write_documents(tmp_path / "run", [node_document(i, gpus=2) for i in range(3)])
    out = tmp_path / "fleet"
    out.mkdir()
    old = [old_report(out, "merge", s) for s in range(4)]
    untouched = others(out)
    result = gpu_audit("merge", str(tmp_path / "run"), "--out", str(out),
                       env={**cli_env, "GPU_AUDIT_KEEP_REPORTS": "2"}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (md,) = (p for p in out.glob("merge-2026*.md") if p.stem not in old)
    left = stems(out, "merge")
    assert {old[3], md.stem} <= left and not set(old[:3]) & left
    for ending in ENDINGS:  # the kept old report is whole, the deleted ones are gone entirely
        assert (out / f"{old[3]}{ending}").read_text() == "old"
        assert not any((out / f"{stem}{ending}").exists() for stem in old[:3])
    assert (out / f"{md.stem}-gpus.csv").exists()  # this run's own table
    for path in untouched:
        assert path.read_text() == "keep me", path.name


def test_merge_retention_reads_the_policy_file_and_zero_keeps_all(tmp_path, cli_env):
    write_documents(tmp_path / "run", [node_document(i, gpus=1) for i in range(2)])
    out = tmp_path / "fleet"
    out.mkdir()
    old = [old_report(out, "merge", s) for s in range(3)]
    (tmp_path / "gpu-audit.toml").write_text("keep_reports = 0\n")
    kept = gpu_audit("merge", str(tmp_path / "run"), "--out", str(out), env=cli_env,
                     cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert set(old) < stems(out, "merge") and len(stems(out, "merge")) == 4
    (tmp_path / "gpu-audit.toml").write_text("keep_reports = 1\n")
    pruned = gpu_audit("merge", str(tmp_path / "run"), "--out", str(out), env=cli_env,
                       cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    # keep 1: this run's report (and the one of the same second, if any), no old one
    assert not set(old) & stems(out, "merge")


def test_merge_bad_keep_reports_is_exit_3_and_no_report_ignores_it(tmp_path, cli_env):
    write_documents(tmp_path / "run", [node_document(0, gpus=1)])
    env = {**cli_env, "GPU_AUDIT_KEEP_REPORTS": "many"}
    bad = gpu_audit("merge", str(tmp_path / "run"), "--out", str(tmp_path / "o"), env=env,
                    cwd=tmp_path)
    assert bad.returncode == 3 and "GPU_AUDIT_KEEP_REPORTS" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert gpu_audit("merge", str(tmp_path / "run"), "--no-report", env=env,
                     cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("command", ["scan", "check"])
def test_fleet_prunes_its_reports_by_the_policy_it_loaded(tmp_path, monkeypatch, command):
    """``gpu-audit fleet scan|check`` with the Ray fan-out answered in-process."""
    from gpu_audit.cli import fleet
    from gpu_audit.collect import ray_fanout

    answers = [ray_fanout.NodeAnswer(f"node{i:02d}" * 4, f"10.0.0.{i}", f"gpu-node-{i:05d}",
                                     node_document(i, gpus=1), None) for i in range(2)]
    monkeypatch.setattr(ray_fanout, "import_ray", lambda: None)
    monkeypatch.setattr(ray_fanout, "connect", lambda target, timeout_s: object())
    monkeypatch.setattr(ray_fanout, "disconnect", lambda ray: None)
    monkeypatch.setattr(ray_fanout, "fan_out", lambda *args, **kwargs: answers)
    monkeypatch.chdir(tmp_path)
    for name in [n for n in __import__("os").environ if n.startswith("GPU_AUDIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GPU_AUDIT_KEEP_REPORTS", "1")
    out = tmp_path / "out"
    out.mkdir()
    name = f"fleet-{command}"
    old = [old_report(out, name, s) for s in range(3)]
    other = old_report(out, "merge", 0)  # another command's report
    code = fleet._run(command, address="127.0.0.1:6379", policy_file=None, timeout=10.0,
                      json_out=True, out=out, no_report=False)
    assert code in (0, 1, 2)  # a verdict, returned as the exit code
    left = stems(out, name)
    assert len(left) == 1 and not left & set(old)
    assert stems(out, "merge") == {other}
