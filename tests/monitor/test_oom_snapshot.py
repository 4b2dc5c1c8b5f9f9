"""Snapshots on OOM, on the CPU: writing, rate limits, the exception hooks, and CPU behaviour."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path

import pytest

from gpu_audit import monitor
from gpu_audit.monitor.oom_snapshot import OomSnapshotter, is_oom_exception
from gpu_audit.snapshot import load_snapshot, summarize
from tests.snapshot.synthetic import GIB, MIB, finetune_oom_after_eval

OOM_EVENT = {"device": 0, "request_bytes": 2 * GIB, "device_limit_bytes": 80 * GIB,
             "device_free_bytes": 300 * MIB}


def test_an_oom_leaves_a_viewer_ready_pickle_and_a_summary(tmp_path: Path):
    folder = tmp_path / "oom-snapshots"
    snapper = OomSnapshotter(folder)
    paths = snapper.write(finetune_oom_after_eval(), "out of memory", OOM_EVENT)
    pickle_path, md_path = map(Path, paths)
    assert pickle_path.suffix == ".pickle" and md_path.suffix == ".md"
    assert pickle_path.name.startswith("oom-") and f"-pid{os.getpid()}" in pickle_path.name
    assert load_snapshot(pickle_path) == finetune_oom_after_eval()  # the data, unchanged
    markdown = md_path.read_text()
    assert "the allocator asked the driver for 2.0 GiB" in markdown
    assert "300.0 MiB free of 80.0 GiB allowed" in markdown
    assert "https://pytorch.org/memory_viz" in markdown
    assert "scripts/train.py:95:optimizer_step" in markdown
    assert snapper.written == paths
    assert sorted(p.name for p in folder.iterdir()) == sorted([pickle_path.name, md_path.name])


def test_two_snapshots_in_the_same_second_keep_both(tmp_path: Path):
    snapper = OomSnapshotter(tmp_path)
    first = snapper.write(finetune_oom_after_eval(), "out of memory", None)
    second = snapper.write(finetune_oom_after_eval(), "out of memory", None)
    assert len(set(first + second)) == 4


def test_an_unwritable_folder_is_logged_not_raised(tmp_path: Path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    snapper = OomSnapshotter(blocker / "sub")
    with caplog.at_level(logging.WARNING, logger="gpu_audit.monitor"):
        assert snapper.write(finetune_oom_after_eval(), "out of memory", None) == []
    assert "could not write the snapshot" in caplog.text


@pytest.fixture
def fake_cuda_snapshot(monkeypatch: pytest.MonkeyPatch):
    """torch.cuda.memory._snapshot() answering as a CUDA process would."""
    torch = pytest.importorskip("torch")
    calls = []

    def snapshot():
        calls.append(1)
        return finetune_oom_after_eval()

    monkeypatch.setattr(torch.cuda.memory, "_snapshot", snapshot)
    return calls


def test_the_observer_is_rate_limited(tmp_path: Path, fake_cuda_snapshot):
    snapper = OomSnapshotter(tmp_path, max_snapshots=2, min_interval_s=0.0)
    for _ in range(5):  # a retry loop that keeps hitting OOM
        snapper.on_oom(0, 2 * GIB, 80 * GIB, 300 * MIB)
    assert len(fake_cuda_snapshot) == 2
    assert len(snapper.written) == 4


def test_the_observer_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog):
    torch = pytest.importorskip("torch")

    def broken():
        raise RuntimeError("CUDA error: unspecified launch failure")

    monkeypatch.setattr(torch.cuda.memory, "_snapshot", broken)
    snapper = OomSnapshotter(tmp_path, min_interval_s=0.0)
    with caplog.at_level(logging.WARNING, logger="gpu_audit.monitor"):
        assert snapper.on_oom(0, 2 * GIB, 80 * GIB, 300 * MIB) is None
    assert "could not take a memory snapshot" in caplog.text

    def worse(*args, **kwargs):
        raise SystemExit(1)

    monkeypatch.setattr(snapper, "capture", worse)
    assert snapper.on_oom(0, 2 * GIB, 80 * GIB, 300 * MIB) is None  # even this stays inside


@pytest.mark.parametrize(
    ("text", "oom"),
    [
        ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 3.81 GiB",
         True),
        ("Out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB", True),
        ("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported", True),
        ('NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at '
         '"/pytorch/c10/cuda/CUDACachingAllocator.cpp":1090, please report a bug', True),
        ("CUDA error: device-side assert triggered", False),
        ("Expected all tensors to be on the same device", False),
    ],
)
def test_which_exceptions_count_as_a_cuda_oom(text: str, oom: bool):
    assert is_oom_exception(RuntimeError(text)) is oom
    assert is_oom_exception(ValueError(text)) is False


def test_an_uncaught_masked_oom_is_captured_and_the_previous_hook_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    seen_by_previous = []
    monkeypatch.setattr(sys, "excepthook", lambda *a: seen_by_previous.append(a[1]))
    monkeypatch.setattr(threading, "excepthook", lambda args: seen_by_previous.append(args))
    snapper = OomSnapshotter(tmp_path)
    captured = []
    monkeypatch.setattr(snapper, "capture", lambda *a, **k: captured.append(a[0]) or [])
    snapper._install_excepthooks()
    masked = RuntimeError("NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT "
                          "FAILED at \"/pytorch/c10/cuda/CUDACachingAllocator.cpp\":995")
    sys.excepthook(RuntimeError, masked, None)
    sys.excepthook(KeyError, KeyError("x"), None)  # not an OOM: passed on, not captured
    assert captured == ["uncaught RuntimeError"]
    assert seen_by_previous[0] is masked and isinstance(seen_by_previous[1], KeyError)
    snapper.uninstall()
    assert sys.excepthook is not None and sys.excepthook.__name__ == "<lambda>"


def test_snapshot_on_oom_on_a_cpu_only_machine_says_so_and_carries_on(
    tmp_path: Path, runtime_dir: Path, caplog
):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    hook = sys.excepthook
    with caplog.at_level(logging.WARNING, logger="gpu_audit.monitor"):
        running = monitor.start(interval_s=60, snapshot_on_oom=True,
                                snapshot_dir=tmp_path / "snaps")
        path = running.publish()
    assert "no CUDA device in this process" in caplog.text
    doc = json.loads(path.read_text())
    assert doc["snapshot_on_oom"] is True
    assert doc["history_recording"] is False
    assert any("no CUDA device" in note for note in doc["notes"])
    assert sys.excepthook is hook  # nothing installed when there is nothing to capture
    assert not (tmp_path / "snaps").exists()
    assert monitor.dump_snapshot() == []


def test_the_markdown_summary_matches_the_offline_summary(tmp_path: Path):
    snapper = OomSnapshotter(tmp_path)
    _, md_path = snapper.write(finetune_oom_after_eval(), "out of memory", OOM_EVENT)
    offline = summarize(finetune_oom_after_eval())
    text = Path(md_path).read_text()
    assert "## Device 0" in text and "## Device 1" in text
    assert f"{offline.devices[0].fragmentation_pct:g}% of reserved" in text
