"""gpu_audit.monitor in a training process: what it publishes, and that it never gets in the way."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit import monitor
from gpu_audit.collect.monitor_files import read_publications
from gpu_audit.monitor import core
from gpu_audit.publication import SCHEMA, process_identity
from tests.monitor.children import REPO
from tests.monitor.recorded import (
    GIB,
    H100_PCI,
    H100_UUID,
    fragmented_training_stats,
    h100_reading,
)


def recorded(*stats: dict, settings: str = "") -> monitor.RecordedAllocatorSource:
    return monitor.RecordedAllocatorSource([h100_reading(s, settings=settings) for s in stats])


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_a_fragmented_h100_job_publishes_its_allocator_privately(runtime_dir: Path):
    running = monitor.start(interval_s=60, source=recorded(fragmented_training_stats(),
                                                            settings="max_split_size_mb:512"))
    assert wait_for(lambda: running.publication_path.exists())  # the thread's first reading
    path = running.publish()

    assert path == runtime_dir / f"{os.getpid()}.json"
    assert stat.S_IMODE(os.lstat(runtime_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert [p.name for p in runtime_dir.iterdir()] == [path.name]  # no temporary files left
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA
    assert doc["pid"] == os.getpid()
    assert doc["uid"] == os.geteuid()
    assert doc["start_ticks"] == process_identity(os.getpid()).start_ticks
    assert doc["torch_version"] == "2.5.1+cu124"
    assert doc["allocator_settings"] == "max_split_size_mb:512"
    assert doc["expandable_segments"] is False
    (device,) = doc["devices"]
    assert (device["uuid"], device["pci_bus_id"]) == (H100_UUID, H100_PCI)
    assert device["allocated_bytes"] == 45 * GIB
    assert device["reserved_bytes"] == 70 * GIB
    assert device["reserved_unallocated_bytes"] == 25 * GIB
    assert device["fragmentation_pct"] == 35.7
    assert device["split_fragmentation_pct"] == 28.6
    assert device["max_split_size_bytes"] == 512 * 1024**2
    assert device["num_alloc_retries"] == 0
    assert len(device["history"]) == doc["sequence"] == 2


def test_steps_and_a_bounded_history_of_retries_are_published(runtime_dir: Path):
    stats = [fragmented_training_stats(retries=n) for n in range(40)]
    running = monitor.start(interval_s=60, source=recorded(*stats))
    assert wait_for(lambda: running.publication_path.exists())  # the thread's first reading
    for _ in range(39):
        monitor.step(10)
        running.publish()
    doc = json.loads(running.publication_path.read_text())
    history = doc["devices"][0]["history"]
    assert doc["step"] == 390
    assert len(history) == core.HISTORY_SAMPLES
    assert [h["num_alloc_retries"] for h in history] == list(range(40 - core.HISTORY_SAMPLES, 40))
    assert history[-1]["step"] == 390


def test_the_thread_publishes_on_its_own_and_stop_removes_the_file(runtime_dir: Path):
    running = monitor.start(interval_s=0.02, source=recorded(fragmented_training_stats()))
    path = runtime_dir / f"{os.getpid()}.json"
    assert wait_for(lambda: path.exists() and json.loads(path.read_text())["sequence"] >= 3)
    assert running.running
    monitor.stop()
    assert not path.exists()
    assert not running.running
    monitor.stop()  # twice is harmless


def test_context_manager_and_decorator_forms(runtime_dir: Path):
    path = runtime_dir / f"{os.getpid()}.json"
    with monitor.start(interval_s=0.02, source=recorded(fragmented_training_stats())) as running:
        assert wait_for(path.exists)
        assert monitor.active() is running
    assert not path.exists() and monitor.active() is None

    seen = []

    @monitor.monitored(interval_s=0.02, source=recorded(fragmented_training_stats()))
    def train(epochs: int) -> str:
        assert wait_for(path.exists)
        seen.append(json.loads(path.read_text())["pid"])
        return f"trained {epochs}"

    assert train(3) == "trained 3"
    assert seen == [os.getpid()]
    assert not path.exists()


def test_one_monitor_per_process(runtime_dir: Path, caplog: pytest.LogCaptureFixture):
    first = monitor.start(interval_s=60, source=recorded(fragmented_training_stats()))
    with caplog.at_level(logging.WARNING, logger="gpu_audit.monitor"):
        again = monitor.start(interval_s=1)
    assert again is first
    assert "already running" in caplog.text


def test_step_without_a_monitor_is_a_no_op():
    assert monitor.active() is None
    monitor.step()
    monitor.stop()
    assert monitor.dump_snapshot() == []


@pytest.mark.parametrize("interval", [0, -1, 1e9, "5"])
def test_a_nonsense_interval_is_refused_at_the_call(interval):
    with pytest.raises(ValueError, match="interval_s"):
        monitor.start(interval_s=interval)


class BrokenSource:
    def __init__(self) -> None:
        self.calls = 0

    def read(self):
        self.calls += 1
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


def test_a_failing_allocator_read_never_reaches_the_program(
    runtime_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(core, "MAX_CONSECUTIVE_FAILURES", 5)
    source = BrokenSource()
    with caplog.at_level(logging.WARNING, logger="gpu_audit.monitor"):
        running = monitor.start(interval_s=0.01, source=source)
        assert wait_for(lambda: not running.running)
    assert source.calls == 5
    messages = [r.getMessage() for r in caplog.records]
    assert sum("publishing failed" in m for m in messages) == 1  # logged once, not per attempt
    assert any("the monitor has stopped" in m for m in messages)
    assert not (runtime_dir / f"{os.getpid()}.json").exists()
    assert running.publish() is None  # a manual publish does not raise either


@pytest.mark.parametrize("situation", ["symlink", "group-readable", "a file"])
def test_an_unsafe_runtime_folder_is_refused_without_raising(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    situation: str
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder = tmp_path / "runtime"
    if situation == "symlink":
        folder.symlink_to(elsewhere)
    elif situation == "group-readable":
        folder.mkdir()
        folder.chmod(0o750)
    else:
        folder.write_text("not a folder")
    monkeypatch.setenv("GPU_AUDIT_RUNTIME_DIR", str(folder))
    with caplog.at_level(logging.WARNING, logger="gpu_audit.monitor"):
        running = monitor.start(interval_s=0.01, source=recorded(fragmented_training_stats()))
        assert running.publish() is None
    assert running.publication_path is None
    assert "not publishing allocator state" in caplog.text
    assert list(elsewhere.iterdir()) == []
    if situation == "group-readable":
        assert list(folder.iterdir()) == []


def test_on_a_cpu_only_torch_it_publishes_no_devices_and_leaves_cuda_alone():
    torch = pytest.importorskip("torch")
    if torch.version.cuda:
        pytest.skip("this check is for a CPU build of torch")
    reading = monitor.TorchAllocatorSource().read()
    assert reading.torch_version == torch.__version__
    assert reading.cuda_available is False
    assert reading.devices == []
    assert not torch.cuda.is_initialized()


def test_the_monitor_never_imports_torch_itself(runtime_dir: Path, cli_env: dict[str, str]):
    script = (
        "import sys, json\n"
        "from gpu_audit import monitor\n"
        "m = monitor.start(interval_s=60)\n"
        "path = m.publish()\n"
        "doc = json.loads(path.read_text())\n"
        "print('torch' in sys.modules, doc['torch_version'], doc['devices'])\n"
    )
    env = cli_env | {"GPU_AUDIT_RUNTIME_DIR": str(runtime_dir)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "None", "[]"]


def test_a_real_child_publishes_and_cleans_up_at_exit(spawn, runtime_dir: Path):
    child = spawn("--steps", "120")
    found = read_publications([runtime_dir])
    (publication,) = found.publications
    assert publication.pid == child.pid
    assert publication.document["step"] == 120
    assert publication.document["devices"][0]["reserved_bytes"] == 70 * GIB
    assert child.finish() == 0
    assert not child.path.exists()
    assert read_publications([runtime_dir]).publications == []


def test_a_forked_worker_leaves_its_parents_publication_alone(spawn, runtime_dir: Path):
    child = spawn("--fork")
    assert child.readline() == "forked"
    assert child.path.exists()  # the worker's exit and stop() did not remove it
    (publication,) = read_publications([runtime_dir]).publications
    assert publication.pid == child.pid
    assert child.finish() == 0
    assert not child.path.exists()


def test_a_monitored_function_inside_a_running_monitor_does_not_start_a_second(runtime_dir: Path):
    outer = monitor.start(interval_s=60, source=recorded(fragmented_training_stats()))
    path = outer.publication_path
    assert wait_for(path.exists)

    @monitor.monitored(interval_s=0.01, source=recorded(fragmented_training_stats()))
    def evaluate() -> bool:
        return monitor.active() is outer

    assert evaluate() is True
    assert outer.running and monitor.active() is outer
    assert path.exists()  # the inner monitor's exit did not remove the outer's file
