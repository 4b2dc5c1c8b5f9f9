"""The hooks' spool folder refuses what another user could have planted."""

from __future__ import annotations

import os
import time

import pytest

from gpu_audit.errors import InputError, UsageError
from gpu_audit.hooks import spool


def test_created_private(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    assert (folder.path.stat().st_mode & 0o777) == 0o700
    assert spool.open_spool(folder.path).path == folder.path  # and accepted again


def test_a_symbolic_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "spool").symlink_to(tmp_path / "real")
    with pytest.raises(UsageError, match="is a symbolic link"):
        spool.open_spool(tmp_path / "spool")


def test_a_folder_others_can_write_is_refused(tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(UsageError, match="writable by group or others"):
        spool.open_spool(folder)


def test_a_file_is_refused(tmp_path):
    (tmp_path / "spool").write_text("")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        spool.open_spool(tmp_path / "spool")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_is_refused(tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    with pytest.raises(UsageError, match="owned by uid 65534"):
        spool.open_spool(folder)


def test_a_missing_parent_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot create it"):
        spool.open_spool(tmp_path / "no" / "spool")


@pytest.mark.parametrize("value", [None, "", "../etc/passwd", "12/3", "abc", "1 2"])
def test_job_ids_are_checked_before_they_name_a_file(value):
    with pytest.raises(UsageError, match="not a Slurm job id"):
        spool.job_id(value)


def test_array_job_ids_are_accepted():
    assert spool.job_id("123") == "123" and spool.job_id("123_4") == "123_4"


def test_a_planted_record_link_is_not_followed(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    secret = tmp_path / "secret"
    secret.write_text("root's")
    (folder.path / spool.record_name("7")).symlink_to(secret)
    with pytest.raises(InputError, match=r"cannot read the prolog's record.*symbolic link"):
        spool.read_record(folder, "7")
    assert spool.read_record(folder, "8") is None


def test_a_record_link_is_replaced_not_written_through(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0\n")
    (folder.path / spool.record_name("10")).symlink_to(victim)
    folder.write_atomic(spool.record_name("10"), "{}")
    assert victim.read_text() == "root:x:0:0\n"
    assert not (folder.path / spool.record_name("10")).is_symlink()


def test_a_fifo_record_is_refused_at_once(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    os.mkfifo(folder.path / spool.record_name("11"))
    started = time.monotonic()
    with pytest.raises(InputError, match="a FIFO, not a regular file"):
        spool.read_record(folder, "11")
    assert time.monotonic() - started < 5


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_record_of_another_user_is_refused(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    record = folder.path / spool.record_name("12")
    record.write_text("{}")
    os.chown(record, 4242, 4242)
    with pytest.raises(InputError, match="owned by uid 4242"):
        spool.read_record(folder, "12")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_spool_in_a_folder_of_another_user_is_refused(tmp_path):
    parent = tmp_path / "shared"
    parent.mkdir()
    (parent / "spool").mkdir(mode=0o700)
    os.chown(parent, 4242, 4242)
    with pytest.raises(UsageError, match=r"shared is owned by uid 4242"):
        spool.open_spool(parent / "spool")


def test_the_spool_held_is_used_after_it_is_swapped_for_a_link(tmp_path):
    """Renaming the spool away and putting a link in its place changes nothing: every record
    is written, read and pruned relative to the folder held."""
    folder = spool.open_spool(tmp_path / "spool")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    old = elsewhere / "prolog-3.json"
    old.write_text("{}")
    week_ago = time.time() - spool.STALE_AFTER_S - 60
    os.utime(old, (week_ago, week_ago))
    (tmp_path / "spool").rename(tmp_path / "moved")
    (tmp_path / "spool").symlink_to(elsewhere)
    folder.write_atomic(spool.record_name("555"), "{}")
    assert spool.prune(folder) == []
    assert (tmp_path / "moved" / "prolog-555.json").exists()
    assert not (elsewhere / "prolog-555.json").exists() and old.exists()


def test_stale_records_are_pruned(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    old, new = folder.path / "prolog-1.json", folder.path / "prolog-2.json"
    other = folder.path / "notes-1.json"
    for path in (old, new, other):
        path.write_text("{}")
    week_ago = time.time() - spool.STALE_AFTER_S - 60
    os.utime(old, (week_ago, week_ago))
    os.utime(other, (week_ago, week_ago))
    (folder.path / "epilog-9.json").symlink_to(old)
    assert spool.prune(folder) == ["prolog-1.json"]
    assert not old.exists() and new.exists() and other.exists()
