"""Opening a snapshot someone sent you must never run code."""

from __future__ import annotations

import os
import pickle
import subprocess
from pathlib import Path

import pytest

from gpu_audit.errors import InputError
from gpu_audit.snapshot import load_snapshot, loads_snapshot
from tests.snapshot.synthetic import finetune_oom_after_eval


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_a_real_shaped_snapshot_loads_in_every_protocol(tmp_path: Path, protocol: int):
    snap = finetune_oom_after_eval()
    snap["external_annotations"] = [{"stage": {"forward", "backward"}, "ratio": 1 + 2j}]
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=protocol))
    loaded = load_snapshot(path)
    assert loaded == snap


class RunsAShellCommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class RunsSubprocess:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (subprocess.call, (["touch", str(self.marker)],))


@pytest.mark.parametrize("payload", [RunsAShellCommand, RunsSubprocess])
@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_a_hostile_pickle_is_refused_without_running_anything(tmp_path: Path, payload, protocol):
    marker = tmp_path / "pwned"
    snap = finetune_oom_after_eval()
    snap["segments"][0]["frames"] = [payload(marker)]  # buried deep inside plausible data
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(snap, protocol=protocol))
    with pytest.raises(InputError, match=r"refusing to load \w+\.\w+") as info:
        load_snapshot(path)
    assert str(path) in str(info.value)
    assert not marker.exists()


def test_builtins_that_execute_are_refused_too():
    payload = b"cbuiltins\neval\n(S'__import__(\"os\").getpid()'\ntR."
    with pytest.raises(InputError, match=r"refusing to load builtins\.eval"):
        loads_snapshot(payload)


def test_persistent_ids_are_refused():
    payload = b"\x80\x02Ptorch_storage\n."  # PERSID: how torch.save points at tensor storage
    with pytest.raises(InputError, match="not a readable pickle"):
        loads_snapshot(payload)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (pickle.dumps(finetune_oom_after_eval())[:200], "not a readable pickle"),
        (b'{"segments": []}', "not a readable pickle"),
        (b"\x89PNG\r\n\x1a\n....", "not a readable pickle"),
    ],
)
def test_a_file_that_is_not_a_snapshot_gets_a_clear_error(tmp_path: Path, content, message):
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        load_snapshot(path)


def test_missing_file_and_directory(tmp_path: Path):
    with pytest.raises(InputError, match="cannot read"):
        load_snapshot(tmp_path / "nope.pickle")
    with pytest.raises(InputError, match="is a directory"):
        load_snapshot(tmp_path)
