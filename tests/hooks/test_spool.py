"""The hooks' spool folder refuses what another user could have planted."""

from __future__ import annotations

import os
import time

import pytest

from gpu_audit.errors import InputError, UsageError
from gpu_audit.hooks import spool


def test_created_private(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    assert (folder.stat().st_mode & 0o777) == 0o700
    assert spool.open_spool(folder) == folder  # and accepted again


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
    with pytest.raises(UsageError, match="is not a folder"):
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
    record = spool.record_path(folder, "7")
    record.symlink_to(secret)
    with pytest.raises(InputError, match="cannot read the prolog's record"):
        spool.read_record(record)
    assert spool.read_record(spool.record_path(folder, "8")) is None


def test_stale_records_are_pruned(tmp_path):
    folder = spool.open_spool(tmp_path / "spool")
    old, new = folder / "prolog-1.json", folder / "prolog-2.json"
    old.write_text("{}")
    new.write_text("{}")
    week_ago = time.time() - spool.STALE_AFTER_S - 60
    os.utime(old, (week_ago, week_ago))
    assert spool.prune(folder) == [old]
    assert not old.exists() and new.exists()
