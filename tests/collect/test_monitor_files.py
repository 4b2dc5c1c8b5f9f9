"""Reading monitor publications from a runtime folder that anyone may have tampered with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.collect.host import iso_utc
from gpu_audit.collect.monitor_files import (
    MAX_FILE_BYTES,
    attach_allocator_states,
    read_publications,
)
from gpu_audit.publication import SCHEMA, pid_namespace, process_identity
from tests.builders import gpu, process
from tests.monitor.children import Child
from tests.monitor.recorded import GIB, H100_PCI, H100_UUID

NOBODY = 65534
OWN_PID = os.getpid()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "gpu-audit"
    path.mkdir(mode=0o700)
    return path


def publication(pid: int = OWN_PID, **overrides) -> dict:
    """A publication as the monitor writes it, for a process that is alive now."""
    identity = process_identity(pid)
    doc = {
        "schema": SCHEMA, "tool_version": "0.1.0", "published_at": "2026-11-22T10:00:00.000Z",
        "sequence": 7, "pid": pid, "uid": os.geteuid(), "hostname": os.uname().nodename,
        "pid_namespace": pid_namespace(),
        "start_ticks": identity.start_ticks if identity else 12345,
        "create_time_s": identity.create_time if identity else 1.0, "start_time": None,
        "interval_s": 5.0, "step": 1200, "torch_version": "2.5.1+cu124",
        "allocator_backend": "native", "allocator_settings": "", "expandable_segments": False,
        "devices": [{
            "index": 0, "uuid": H100_UUID.removeprefix("GPU-").lower(), "pci_bus_id": H100_PCI,
            "allocated_bytes": 45 * GIB, "reserved_bytes": 70 * GIB,
            "inactive_split_bytes": 20 * GIB, "reserved_unallocated_bytes": 25 * GIB,
            "fragmentation_pct": 35.7, "split_fragmentation_pct": 28.6, "num_alloc_retries": 4,
            "num_ooms": 0, "history": [
                {"at": "2026-11-22T09:59:55.000Z", "num_alloc_retries": 1, "num_ooms": 0,
                 "step": 1100},
                {"at": "2026-11-22T10:00:00.000Z", "num_alloc_retries": 4, "num_ooms": 0,
                 "step": 1200},
            ],
        }],
        "oom_snapshots": [], "notes": [],
    }
    doc.update(overrides)
    return doc


def put(folder: Path, doc: dict | bytes | str, pid: int = OWN_PID, mode: int = 0o600) -> Path:
    path = folder / f"{pid}.json"
    data = doc if isinstance(doc, bytes) else (doc if isinstance(doc, str) else json.dumps(doc))
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    path.chmod(mode)
    return path


def only_skip(result):
    assert result.publications == []
    (skipped,) = result.skipped
    return skipped


def test_a_live_publication_is_read(folder: Path):
    put(folder, publication())
    result = read_publications([folder])
    assert result.skipped == []
    (found,) = result.publications
    assert found.pid == OWN_PID
    assert found.document["devices"][0]["reserved_bytes"] == 70 * GIB
    assert found.age_s is not None and found.age_s >= 0


def test_a_missing_folder_is_simply_empty(tmp_path: Path):
    result = read_publications([tmp_path / "nothing-here"])
    assert (result.publications, result.skipped) == ([], [])


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_dead_process_file_is_stale_and_quiet(folder: Path):
    pid = dead_pid()
    put(folder, publication(pid), pid=pid)
    skipped = only_skip(read_publications([folder]))
    assert "has exited" in skipped.reason
    assert not skipped.suspicious
    assert read_publications([folder]).probe_errors() == []


def test_a_reused_pid_is_not_mistaken_for_the_publisher(folder: Path):
    doc = publication()
    doc["start_ticks"] += 1  # the publisher started at another moment
    doc["create_time_s"] -= 3600
    put(folder, doc)
    skipped = only_skip(read_publications([folder]))
    assert "belongs to a process started later" in skipped.reason


def test_a_killed_child_leaves_a_file_that_is_ignored(folder: Path):
    child = Child(folder)
    assert read_publications([folder]).publications[0].pid == child.pid
    child.kill()  # SIGKILL: no atexit, the file stays behind
    assert child.path.exists()
    skipped = only_skip(read_publications([folder]))
    assert f"process {child.pid} has exited" in skipped.reason


def test_a_symlinked_file_is_never_followed(folder: Path, tmp_path: Path):
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text(json.dumps(publication()))
    elsewhere.chmod(0o600)
    (folder / f"{OWN_PID}.json").symlink_to(elsewhere)
    result = read_publications([folder])
    skipped = only_skip(result)
    assert skipped.reason == "is a symbolic link" and skipped.suspicious
    assert "is a symbolic link" in result.probe_errors()[0].message


def test_a_symlinked_folder_is_never_followed(tmp_path: Path, folder: Path):
    put(folder, publication())
    link = tmp_path / "link"
    link.symlink_to(folder)
    skipped = only_skip(read_publications([link]))
    assert skipped.reason == "folder is a symbolic link"


def test_a_folder_others_can_enter_is_refused(folder: Path):
    put(folder, publication())
    folder.chmod(0o755)
    skipped = only_skip(read_publications([folder]))
    assert "mode 0755" in skipped.reason and skipped.suspicious


def test_another_users_folder_is_refused(folder: Path, monkeypatch: pytest.MonkeyPatch):
    put(folder, publication())
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    else:  # not root: be someone else instead
        real = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: real + 1)
    skipped = only_skip(read_publications([folder]))
    assert "belongs to uid" in skipped.reason and skipped.suspicious


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_file_is_refused(folder: Path):
    path = put(folder, publication())
    os.chown(path, NOBODY, NOBODY)
    skipped = only_skip(read_publications([folder]))
    assert skipped.reason == "belongs to uid 65534, not to this user"


def test_a_file_others_can_read_is_refused(folder: Path):
    put(folder, publication(), mode=0o644)
    skipped = only_skip(read_publications([folder]))
    assert "mode 0644" in skipped.reason


def test_a_fifo_does_not_block_the_reader(folder: Path):
    os.mkfifo(folder / f"{OWN_PID}.json", 0o600)
    skipped = only_skip(read_publications([folder]))
    assert skipped.reason == "is not a regular file"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\x00\xff\xfe garbage", "is not valid JSON"),
        ("{\"schema\": \"gpu-audit.monitor/1\", ", "is not valid JSON"),
        ("[1, 2, 3]", "not a JSON object"),
        ("{\"schema\": \"gpu-audit.scan/1\"}", "is not a publication (schema"),
        ("[" * 100_000 + "]" * 100_000, "is not valid JSON"),
        (b" " * (MAX_FILE_BYTES + 1), "too large"),
    ],
)
def test_garbage_is_refused(folder: Path, content, reason):
    put(folder, content)
    skipped = only_skip(read_publications([folder]))
    assert reason in skipped.reason


@pytest.mark.parametrize(
    ("overrides", "reason", "suspicious"),
    [
        ({"pid": 1}, "names pid 1", True),
        ({"uid": NOBODY}, "was written for uid 65534", True),
        ({"hostname": "other-node"}, "published on host 'other-node'", False),
        ({"pid_namespace": "pid:[4026532999]"}, "another PID namespace", False),
        ({"schema": "gpu-audit.monitor/2"}, "upgrade gpu-audit", False),
        ({"published_at": "yesterday"}, "no valid published_at", True),
        ({"devices": {"0": {}}}, "no valid device list", True),
    ],
)
def test_inconsistent_publications_are_refused(folder: Path, overrides, reason, suspicious):
    put(folder, publication(**overrides))
    skipped = only_skip(read_publications([folder]))
    assert reason in skipped.reason
    assert skipped.suspicious is suspicious


def test_unrelated_names_are_ignored(folder: Path):
    (folder / "notes.txt").write_text("hello")
    (folder / f".{OWN_PID}.json.x1y2.tmp").write_text("{half a wri")
    (folder / "0.json").write_text("{}")
    result = read_publications([folder])
    assert (result.publications, result.skipped) == ([], [])


def test_the_same_process_in_two_folders_is_counted_once(tmp_path: Path):
    first, second = tmp_path / "a", tmp_path / "b"
    for f in (first, second):
        f.mkdir(mode=0o700)
        put(f, publication())
    assert len(read_publications([first, second]).publications) == 1


def test_the_reader_never_raises_on_a_file_where_a_folder_should_be(tmp_path: Path):
    path = tmp_path / "gpu-audit"
    path.write_text("")
    skipped = only_skip(read_publications([path]))
    assert skipped.reason == "folder is not a directory"


# --- the join ---------------------------------------------------------------------------------


@pytest.fixture
def published(folder: Path):
    put(folder, publication())
    return read_publications([folder])


def h100(**overrides):
    return gpu(0, **({"uuid": H100_UUID, "pci_bus_id": H100_PCI} | overrides))


def trainer(**overrides):
    return process(OWN_PID, 72 * 1024, ["python", "train.py"], **({"start_time": None} | overrides))


def test_joined_by_uuid(published):
    (joined,) = attach_allocator_states([trainer(gpu_uuid=H100_UUID)], [h100()], published)
    state = joined.allocator
    assert state is not None
    assert (state.reserved_bytes, state.allocated_bytes) == (70 * GIB, 45 * GIB)
    assert state.fragmentation_pct == 35.7
    assert [s.num_alloc_retries for s in state.history] == [1, 4]
    assert state.torch_version == "2.5.1+cu124"


def test_joined_by_pci_bus_id_when_nvml_gives_no_uuid(published):
    (joined,) = attach_allocator_states([trainer()], [h100(uuid=None)], published)
    assert joined.allocator is not None


def test_not_joined_to_another_gpu(published):
    other = gpu(0, uuid="GPU-00000000-aaaa-bbbb-cccc-000000000000", pci_bus_id="00000000:AF:00.0")
    (joined,) = attach_allocator_states([trainer()], [other], published)
    assert joined.allocator is None


def test_joined_one_to_one_when_a_side_cannot_name_its_device(folder: Path):
    doc = publication()
    doc["devices"][0]["uuid"] = doc["devices"][0]["pci_bus_id"] = None  # an old torch
    put(folder, doc)
    (joined,) = attach_allocator_states([trainer()], [h100()], read_publications([folder]))
    assert joined.allocator is not None


def test_not_joined_when_the_start_time_differs(published):
    later = trainer(start_time="2030-01-01T00:00:00Z")
    (joined,) = attach_allocator_states([later], [h100()], published)
    assert joined.allocator is None


def test_joined_when_the_start_time_agrees(published):
    create_time = published.publications[0].create_time
    (joined,) = attach_allocator_states([trainer(start_time=iso_utc(create_time))], [h100()],
                                        published)
    assert joined.allocator is not None


def test_a_process_in_another_namespace_is_not_joined(published):
    (joined,) = attach_allocator_states([trainer(visible=False)], [h100()], published)
    assert joined.allocator is None


def test_each_gpu_of_a_two_gpu_process_gets_its_own_device(folder: Path):
    doc = publication()
    second = dict(doc["devices"][0], index=1, uuid="GPU-22222222-0000-0000-0000-000000000000",
                  pci_bus_id="00000000:5E:00.0", reserved_bytes=10 * GIB)
    doc["devices"].append(second)
    put(folder, doc)
    gpus = [h100(), gpu(1, uuid=second["uuid"], pci_bus_id=second["pci_bus_id"])]
    procs = [trainer(), trainer(gpu_index=1)]
    joined = attach_allocator_states(procs, gpus, read_publications([folder]))
    assert [p.allocator.reserved_bytes for p in joined] == [70 * GIB, 10 * GIB]
    assert [p.allocator.cuda_device for p in joined] == [0, 1]


def test_processes_without_publication_are_unchanged(published):
    stranger = process(OWN_PID + 1, 100)
    assert attach_allocator_states([stranger], [h100()], published) == [stranger]
