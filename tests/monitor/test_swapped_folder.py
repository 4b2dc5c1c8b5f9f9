"""The monitor's runtime folder swapped for a symbolic link between two publications: nothing is
written through the link, and the monitor stops publishing instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_audit import monitor
from gpu_audit.monitor.folder import FolderChanged, PrivateFolder, supported
from tests.monitor.recorded import fragmented_training_stats
from tests.monitor.test_monitor import recorded

pytestmark = pytest.mark.skipif(not supported(), reason="needs descriptor-relative file calls")


def test_a_folder_swapped_for_a_symlink_does_not_redirect_writes(runtime_dir: Path,
                                                                 tmp_path: Path, caplog):
    running = monitor.start(interval_s=60, source=recorded(fragmented_training_stats(),
                                                           fragmented_training_stats()))
    name = f"{os.getpid()}.json"
    assert running.publish() == runtime_dir / name
    elsewhere = tmp_path / "victim"  # a folder someone else wants root to write into
    elsewhere.mkdir(mode=0o700)
    os.rename(runtime_dir, tmp_path / "moved-away")
    runtime_dir.symlink_to(elsewhere)

    assert running.publish() is None
    assert list(elsewhere.iterdir()) == []
    assert "stopped publishing" in caplog.text and "replaced" in caplog.text
    running.stop()
    assert list(elsewhere.iterdir()) == []
    # The original publication, in the folder that was moved away, was not touched either.
    assert (tmp_path / "moved-away" / name).exists()


def test_a_folder_given_away_after_opening_is_refused(tmp_path: Path, monkeypatch):
    folder = tmp_path / "runtime"
    folder.mkdir(mode=0o700)
    held = PrivateFolder(folder)
    held.write_atomic("1.json", b"{}")
    os.chmod(folder, 0o755)
    with pytest.raises(FolderChanged, match="must be 0700"):
        held.write_atomic("1.json", b"{}")
    os.chmod(folder, 0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    with pytest.raises(FolderChanged, match="not to this user"):
        held.write_atomic("1.json", b"{}")
    held.close()


def test_a_symlink_is_never_opened_as_the_folder(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(FolderChanged):
        PrivateFolder(link)


def test_no_temporary_files_are_left_and_files_are_private(tmp_path: Path):
    folder = tmp_path / "runtime"
    folder.mkdir(mode=0o700)
    held = PrivateFolder(folder)
    held.write_atomic("7.json", b'{"a": 1}')
    held.write_atomic("7.json", b'{"a": 2}')
    assert [p.name for p in folder.iterdir()] == ["7.json"]
    assert (folder / "7.json").read_bytes() == b'{"a": 2}'
    assert (folder / "7.json").stat().st_mode & 0o777 == 0o600
    held.close()
