"""Reports do not pile up: the newest ``keep_reports`` of each command stay, nothing else is
touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_audit.report.files import prune_reports, report_stem, write_report


def make(folder: Path, command: str, second: int, pid: int = 100, host: str = "node1") -> str:
    stem = report_stem(command, f"2026-11-22T10:00:{second:02d}Z", host, f"p{pid}")
    (folder / f"{stem}.md").write_text("md")
    (folder / f"{stem}.json").write_text("{}")
    return stem


def stems(folder: Path, command: str = "scan") -> list[str]:
    return sorted({p.name.rsplit(".", 1)[0] for p in folder.iterdir()
                   if p.name.startswith(f"{command}-")})


def test_keeps_the_newest_reports_of_the_command_and_their_twins(tmp_path):
    made = [make(tmp_path, "scan", s) for s in range(5)]
    checks = [make(tmp_path, "check", s) for s in range(5)]
    deleted = prune_reports(tmp_path, "scan", 2, host="node1")
    assert stems(tmp_path) == made[3:]
    assert len(deleted) == 6  # three reports, markdown and JSON each
    assert stems(tmp_path, "check") == checks  # another command's reports are its own


def test_zero_keeps_everything(tmp_path):
    made = [make(tmp_path, "scan", s) for s in range(4)]
    assert prune_reports(tmp_path, "scan", 0, host="node1") == []
    assert stems(tmp_path) == made


def test_only_files_gpu_audit_names_are_touched(tmp_path):
    make(tmp_path, "scan", 1)
    make(tmp_path, "scan", 2)
    others = ["scan-notes.md", "scan-20261122T100000Z-node1.md", "my-scan-20261122T100000Z-p1-x.md",
              ".scan-20261122T100000Z-p1-node1.md.abc.tmp", "scan-20261122T100000Z-p1-node1.txt",
              "merge-20261122T100000Z-p1-node1-gpus.csv"]
    for name in others:
        (tmp_path / name).write_text("keep me")
    prune_reports(tmp_path, "scan", 1, host="node1")
    for name in others:
        assert (tmp_path / name).read_text() == "keep me", name


def test_symbolic_links_are_neither_followed_nor_deleted(tmp_path):
    target = tmp_path / "precious.md"
    target.write_text("precious")
    folder = tmp_path / "reports"
    folder.mkdir()
    link = folder / "scan-20261122T090000Z-p1-node1.md"
    link.symlink_to(target)
    (folder / "scan-20261122T090000Z-p2-node1.md").mkdir()  # a folder with a report's name
    for s in range(3):
        make(folder, "scan", s)
    prune_reports(folder, "scan", 1, host="node1")
    assert link.is_symlink() and target.read_text() == "precious"
    assert (folder / "scan-20261122T090000Z-p2-node1.md").is_dir()
    assert len(stems(folder)) == 3  # the link, the folder and the newest report


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_reports_are_left_alone(tmp_path):
    theirs = make(tmp_path, "scan", 0)
    for suffix in (".md", ".json"):
        os.chown(tmp_path / f"{theirs}{suffix}", 4242, 4242)
    mine = [make(tmp_path, "scan", s) for s in (1, 2)]
    prune_reports(tmp_path, "scan", 1, host="node1")
    assert stems(tmp_path) == [theirs, mine[1]]


def test_reports_of_the_same_second_as_the_oldest_kept_all_stay(tmp_path):
    old = make(tmp_path, "scan", 0)
    together = [make(tmp_path, "scan", 5, pid) for pid in (11, 12, 13)]
    prune_reports(tmp_path, "scan", 1, host="node1")
    assert stems(tmp_path) == sorted(together) and old not in stems(tmp_path)


def test_the_report_just_written_is_never_pruned(tmp_path):
    newer = [make(tmp_path, "scan", s) for s in (30, 40)]
    own = make(tmp_path, "scan", 1)  # a clock behind the others'
    prune_reports(tmp_path, "scan", 1, own=own)
    assert stems(tmp_path) == sorted([own, newer[1]])


def test_write_report_prunes_after_writing(tmp_path, capsys):
    for s in range(3):
        make(tmp_path, "scan", s)
    md = write_report("scan", "2026-11-22T10:01:00Z", "node1", {"x": 1}, "# report\n", tmp_path,
                      keep=2)
    assert md is not None and md.exists()
    assert len(stems(tmp_path)) == 2 and md.name.rsplit(".", 1)[0] in stems(tmp_path)


def test_companions_are_deleted_with_their_report_and_only_when_named(tmp_path):
    made = [make(tmp_path, "merge", s) for s in range(3)]
    for stem in made:
        (tmp_path / f"{stem}-gpus.csv").write_text("csv")
    prune_reports(tmp_path, "merge", 2, host="node1")  # without companions: not its files
    assert len(list(tmp_path.glob("*-gpus.csv"))) == 3
    deleted = prune_reports(tmp_path, "merge", 1, host="node1", companions=("-gpus.csv",))
    assert {p.name for p in deleted} == {f"{made[1]}{e}" for e in (".md", ".json", "-gpus.csv")} \
        | {f"{made[0]}-gpus.csv"}  # the table the first pruning left behind goes too
    assert [p.name for p in tmp_path.glob("*-gpus.csv")] == [f"{made[2]}-gpus.csv"]
