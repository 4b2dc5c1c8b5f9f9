"""Hostile numbers where gpu-audit parses them: GPU specs and the job's GPU variables, driver
versions in the policy and in documents, integer settings, PyTorch memory snapshots, diag's
planted fault and monitor publications. Each is refused (exit 3, one line naming the value's
place) or dropped as malformed, quickly, never an internal error. Memory figures for the GPU
specs are in bench/bench_bounds_inputs.py."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit.collect.monitor_files import attach_allocator_states, read_publications
from gpu_audit.errors import UsageError
from gpu_audit.gpu_selection import MAX_ENTRIES, resolve_gpus
from gpu_audit.model import MigDevice
from gpu_audit.publication import SCHEMA, pid_namespace, process_identity
from gpu_audit.report.jsonout import scan_document
from tests import builders as b
from tests import fakegpu
from tests.fakegpu import h100_node
from tests.snapshot.synthetic import finetune_oom_after_eval

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

HUGE = "9" * 5000
QUICK_S = 10.0  # generous: a subprocess start on two loaded cores, the refusal itself is instant
GIB = 1024**3
JOB_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES",
                 "SLURM_JOB_USER")


def gpu_audit(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gpu_audit", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    done.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return done


def refused(done: subprocess.CompletedProcess, *words: str) -> str:
    """The one error line of a run that exited 3 quickly; each of ``words`` is in it."""
    assert done.returncode == 3, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("gpu-audit:")]
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert done.elapsed < QUICK_S, done.elapsed  # type: ignore[attr-defined]
    return lines[0]


@pytest.fixture
def node_env(fake_nvml, cli_env):
    env = fake_nvml(h100_node(4), base=cli_env)
    for name in JOB_VARIABLES:
        env.pop(name, None)
    return env


# --- GPU specs and the job's GPUs ----------------------------------------------------------------


@pytest.mark.parametrize("command", [["scan", "--no-report"], ["check", "--no-report"],
                                     ["diag", "--no-report", "--device", "cpu"]])
@pytest.mark.parametrize(("spec", "words"), [
    ("0-99999999999", ["--gpus: GPU 4 does not exist (this node has 4 GPUs)"]),
    ("99999999999", ["--gpus: GPU 99999999999 does not exist (this node has 4 GPUs)"]),
    (f"0-{HUGE}", ["--gpus: GPU index", "5000 digits", "at most 20"]),
    ("\u0663", ["--gpus: GPU index", "not a whole number"]),  # Arabic-Indic three
])
def test_hostile_gpu_specs_are_refused_before_anything_is_expanded(command, spec, words,
                                                                   node_env, tmp_path):
    refused(gpu_audit([*command, "--gpus", spec], node_env, tmp_path), *words)


@pytest.mark.parametrize(("name", "value", "words"), [
    ("SLURM_JOB_GPUS", "0-999999999", ["SLURM_JOB_GPUS=0-999999999",
                                       "GPU 999999999 is beyond the 1024 GPUs"]),
    ("SLURM_STEP_GPUS", HUGE, ["SLURM_STEP_GPUS", "5000 digits"]),
    ("CUDA_VISIBLE_DEVICES", "\u0663", ["CUDA_VISIBLE_DEVICES", "not a whole number"]),
])
def test_the_prolog_refuses_hostile_job_gpus(name, value, words, node_env, tmp_path):
    env = {**node_env, "SLURM_JOB_ID": "4711", name: value}
    done = gpu_audit(["check", "--slurm", "prolog", "--spool", str(tmp_path / "spool")], env,
                     tmp_path)
    refused(done, *words)


def test_ordinary_mistakes_keep_their_messages(node_env, tmp_path):
    refused(gpu_audit(["scan", "--no-report", "--gpus", "2-7"], node_env, tmp_path),
            "--gpus: GPU 4 does not exist (this node has 4 GPUs)")
    refused(gpu_audit(["scan", "--no-report", "--gpus", "3-1"], node_env, tmp_path),
            "range '3-1' runs backwards")


GPUS = [b.gpu(i, uuid=f"GPU-{i}aaaaaaa-1111-2222-3333-44444444444{i}",
              pci_bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(4)]


def timed_refusal(spec: str, environ: dict[str, str] | None = None, gpus=GPUS) -> str:
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:
        resolve_gpus(spec, gpus, environ or {})
    assert time.monotonic() - started < QUICK_S
    return str(caught.value)


def test_ten_million_commas_are_refused_by_their_count():
    message = timed_refusal("," * 10_000_000)
    assert f"at most {MAX_ENTRIES}" in message and "10000001 entries" in message
    job = timed_refusal("job", {"SLURM_JOB_GPUS": "0," * 5_000_000})
    assert "--gpus job (SLURM_JOB_GPUS)" in job and f"at most {MAX_ENTRIES}" in job


def test_many_overlapping_ranges_cost_one_pass_over_the_node():
    spec = ",".join(f"{i % 4}-3" for i in range(MAX_ENTRIES - 1))
    started = time.monotonic()
    assert resolve_gpus(spec, GPUS, {}).indices == (0, 1, 2, 3)
    assert time.monotonic() - started < QUICK_S


def test_a_job_value_is_quoted_short_in_messages():
    message = timed_refusal("job", {"SLURM_JOB_GPUS": "0,1," + "x" * 100_000})
    assert len(message) < 1000, len(message)


@pytest.mark.parametrize(("entry", "words"), [
    (f"MIG-GPU-1aaaaaaa/{HUGE}/0", ["GPU instance id", "5000 digits"]),
    (f"MIG-GPU-1aaaaaaa/2/{HUGE}", ["compute instance id", "5000 digits"]),
    ("MIG-GPU-1aaaaaaa/\u0662/0", ["GPU instance id", "not a whole number"]),
])
def test_mig_instance_numbers_are_bounded(entry, words):
    devices = [MigDevice(index=0, uuid="MIG-aaaa", gpu_instance_id=2, compute_instance_id=0)]
    gpus = [GPUS[0], b.gpu(1, uuid="GPU-1aaaaaaa-1111-2222-3333-444444444441", mig_mode=True,
                           mig_devices=devices)]
    message = timed_refusal(entry, gpus=gpus)
    assert all(word in message for word in words), message
    assert len(message) < 600


def test_a_huge_subject_number_in_a_saved_document_is_not_a_gpu():
    from gpu_audit.gpu_selection import apply_selection
    from gpu_audit.model import ProbeError

    scan = b.scan(GPUS, probe_errors=[ProbeError("nvml", f"gpu:{HUGE}", "x"),
                                      ProbeError("nvml", "gpu:\u00b2", "y"),
                                      ProbeError("nvml", "gpu:3", "z")])
    kept = apply_selection(scan, resolve_gpus("0", GPUS, {})).probe_errors
    assert [e.message for e in kept] == ["x", "y"]


# --- driver versions and integer settings --------------------------------------------------------


@pytest.fixture
def saved_scan(tmp_path: Path):
    def write(**driver: str) -> Path:
        doc = scan_document(b.scan([b.gpu(0)]), [], 0)
        doc["driver"].update(driver)
        path = tmp_path / "scan.json"
        path.write_text(json.dumps(doc))
        return path
    return write


def test_a_5000_digit_min_driver_version_in_the_policy_is_refused(saved_scan, tmp_path,
                                                                    cli_env):
    (tmp_path / "gpu-audit.toml").write_text(f'[check]\nmin_driver_version = "535.{HUGE}"\n')
    done = gpu_audit(["check", "--from", str(saved_scan()), "--no-report"], cli_env, tmp_path)
    line = refused(done, "gpu-audit.toml:2", "min_driver_version", "dotted version")
    assert len(line) < 400


def test_a_5000_digit_min_driver_version_in_the_environment_is_refused(saved_scan, tmp_path,
                                                                         cli_env):
    env = {**cli_env, "GPU_AUDIT_MIN_CUDA_DRIVER_VERSION": f"{HUGE}.1"}
    done = gpu_audit(["check", "--from", str(saved_scan()), "--no-report"], env, tmp_path)
    refused(done, "GPU_AUDIT_MIN_CUDA_DRIVER_VERSION", "min_cuda_driver_version")


def test_a_hostile_driver_version_in_a_document_is_unknown_not_a_crash(saved_scan, tmp_path,
                                                                         cli_env):
    (tmp_path / "gpu-audit.toml").write_text('[check]\nmin_driver_version = "535.104.05"\n')
    path = saved_scan(driver_version=f"535.{HUGE}")
    done = gpu_audit(["check", "--json", "--from", str(path), "--no-report"], cli_env, tmp_path)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    (driver,) = [c for c in json.loads(done.stdout)["checks"] if c["id"] == "nvidia-driver"]
    assert driver["status"] == "unknown"
    assert "not a version gpu-audit can compare" in driver["summary"]


@pytest.mark.parametrize(("text", "words"), [
    (f"keep_reports = {'9' * 400}\n", ["gpu-audit.toml:1", "keep_reports", "too large"]),
    (f"[check]\nmin_gpus = -{'9' * 400}\n", ["gpu-audit.toml:2", "min_gpus", "too large"]),
    (f"[validate]\ncycles = {'9' * 400}\n", ["gpu-audit.toml:2", "cycles", "more than 20"]),
])
def test_integer_settings_of_hundreds_of_digits_are_refused(text, words, saved_scan, tmp_path,
                                                            cli_env):
    (tmp_path / "gpu-audit.toml").write_text(text)
    command = ["validate", "--device", "cpu"] if "[validate]" in text else \
        ["check", "--from", str(saved_scan()), "--no-report"]
    refused(gpu_audit(command, cli_env, tmp_path), *words)


@pytest.mark.parametrize("value", ["\u0663", "1_000", "9" * 30, HUGE])
def test_integer_variables_take_ascii_digits_only(value, saved_scan, tmp_path, cli_env):
    env = {**cli_env, "GPU_AUDIT_MIN_GPUS": value}
    done = gpu_audit(["check", "--from", str(saved_scan()), "--no-report"], env, tmp_path)
    line = refused(done, "GPU_AUDIT_MIN_GPUS", "must be an integer")
    assert len(line) < 300


# --- PyTorch memory snapshots --------------------------------------------------------------------


def hostile_snapshot(tmp_path: Path, change) -> Path:
    snap = copy.deepcopy(finetune_oom_after_eval())
    change(snap)
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(snap))
    return path


def grow_first_block(snap: dict, by: int) -> None:
    segment = snap["segments"][0]
    segment["blocks"][0]["size"] += by
    segment["total_size"] += by


@pytest.mark.parametrize(("change", "words"), [
    (lambda s: grow_first_block(s, 10**5000),
     ["segments[0].blocks[0].size", "0 to 2**64 - 1", "found an integer of 16610 bits"]),
    (lambda s: s["device_traces"][0][0].update(time_us=10**5000),
     ["device_traces[0][0].time_us", "an integer of 16610 bits"]),
    (lambda s: s["segments"][0].update(device=-(10**5000)),
     ["segments[0].device", "an integer of 16610 bits"]),
    (lambda s: s["segments"][0].update(stream=10**5000), ["segments[0].stream"]),
    (lambda s: s["segments"][0].update(segment_pool_id=(10**5000, 1)),
     ["segments[0].segment_pool_id[0]"]),
    (lambda s: s["segments"][0]["blocks"][0].update(state=10**5000),
     ["segments[0].blocks[0].state", "found an integer of 16610 bits"]),
    (lambda s: s.update(allocator_settings={"max_split_size": 10**5000}),
     ["allocator_settings", "integer of 16610 bits"]),
    (lambda s: s.update(allocator_settings={"garbage_collection_threshold": float("inf")}),
     ["allocator_settings", "inf"]),
    (lambda s: (s.pop("segments"), s.update({10**5000: 1})),
     ["no 'segments' key", "an integer of 16610 bits"]),
    (lambda s: grow_first_block(s, -(2**40)),
     ["segments[0].blocks[0].size", "0 to 2**64 - 1", "found -"]),
    (lambda s: s["segments"][0]["blocks"][0].update(requested_size=2**64),
     ["segments[0].blocks[0].requested_size", "0 to 2**64 - 1"]),
    (lambda s: s["device_traces"][0][0].update(size=-1), ["device_traces[0][0].size"]),
    (lambda s: s["segments"][0]["blocks"][0].update(size=1e300), ["expected an integer"]),
])
def test_absurd_numbers_in_a_snapshot_are_refused(change, words, tmp_path, cli_env):
    path = hostile_snapshot(tmp_path, change)
    done = gpu_audit(["snapshot", "--no-report", "--json", str(path)], cli_env, tmp_path)
    refused(done, "snap.pickle", "not a PyTorch memory snapshot", *words)


def test_a_huge_line_number_in_a_stack_frame_is_unknown(tmp_path, cli_env):
    frame = {"filename": "/home/alice/train.py", "line": 10**5000, "name": "step"}
    path = hostile_snapshot(tmp_path, lambda s: s["segments"][0]["blocks"][0].update(
        frames=[frame]))
    done = gpu_audit(["snapshot", "--no-report", "--json", str(path)], cli_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "alice/train.py:0:step" in done.stdout


def test_a_real_sized_snapshot_still_reads(tmp_path, cli_env):
    path = hostile_snapshot(tmp_path, lambda s: s.update(
        allocator_settings={"max_split_size": 2**64 - 1, "garbage_collection_threshold": 0.8}))
    done = gpu_audit(["snapshot", "--no-report", "--json", str(path)], cli_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["devices"]


# --- diag --plant-fault --------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "words"), [
    (f"{HUGE}:3", ["--plant-fault: byte offset", "5000 digits"]),
    ("\u0663:1", ["--plant-fault: byte offset", "not a whole number"]),
    ("4096:\u0663", ["--plant-fault: bit", "not a whole number"]),
    ("4096:8", ["--plant-fault: bit", "out of range"]),
    (f"{2**64}:1", ["--plant-fault: byte offset", "out of range"]),
    ("x", ["OFFSET:BIT"]),
])
def test_a_hostile_planted_fault_is_refused(spec, words, tmp_path, cli_env):
    done = gpu_audit(["diag", "--no-report", "--device", "cpu", "--plant-fault", spec], cli_env,
                     tmp_path)
    refused(done, *words)


# --- monitor publications ------------------------------------------------------------------------


@pytest.fixture
def sleeper():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield child
    child.kill()
    child.wait()


def hostile_publication(folder: Path, pid: int) -> None:
    identity = process_identity(pid)
    assert identity is not None
    gpu = fakegpu.h100_gpu(0)
    doc = {
        "schema": SCHEMA, "published_at": "2026-11-22T10:00:00.000Z", "pid": pid,
        "uid": os.geteuid(), "hostname": os.uname().nodename, "pid_namespace": pid_namespace(),
        "start_ticks": identity.start_ticks, "create_time_s": identity.create_time,
        "interval_s": 1e308, "step": -5, "torch_version": "2.5.1",
        "devices": [{
            "index": 0, "uuid": gpu["uuid"], "pci_bus_id": gpu["pci_bus_id"],
            "allocated_bytes": -(45 * GIB), "reserved_bytes": 9 * 10**27 * 1024**4,
            "requested_bytes": 40 * GIB, "fragmentation_pct": float("inf"),
            "split_fragmentation_pct": -3.0, "num_alloc_retries": 4, "num_ooms": 1e30,
            "history": [{"at": "2026-11-22T10:00:00.000Z", "num_alloc_retries": -1,
                         "num_ooms": 0, "step": 1}],
        }],
    }
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{pid}.json"
    path.write_text(json.dumps(doc))  # json writes inf as Infinity, which json.loads reads back
    path.chmod(0o600)


def test_out_of_range_published_figures_are_dropped_and_said(sleeper, tmp_path):
    folder = tmp_path / "runtime"
    hostile_publication(folder, sleeper.pid)
    published = read_publications([folder])
    (publication,) = published.publications
    gpu = fakegpu.h100_gpu(0)
    process = b.process(sleeper.pid, 72 * 1024, ["python"], start_time=None,
                        gpu_uuid=gpu["uuid"])
    (joined,) = attach_allocator_states([process], [b.gpu(0, uuid=gpu["uuid"])], published)
    state = joined.allocator
    assert state is not None and state.requested_bytes == 40 * GIB
    assert (state.allocated_bytes, state.reserved_bytes, state.fragmentation_pct,
            state.split_fragmentation_pct, state.num_ooms, state.interval_s, state.step) == \
        (None,) * 7
    assert state.num_alloc_retries == 4 and state.history[0].num_alloc_retries is None
    (error,) = published.probe_errors()
    assert error.subject == f"pid:{sleeper.pid}"
    assert "8 malformed figures dropped" in error.message
    assert "devices[0].fragmentation_pct: inf is outside 0 to 100" in error.message
    assert "devices[0].allocated_bytes: -48318382080 is outside 0 to 2**60" in error.message
    assert "and 3 more" in error.message
    assert len(publication.dropped) == 8


def test_scan_never_shows_out_of_range_published_figures(sleeper, fake_nvml, cli_env, tmp_path):
    folder = tmp_path / "runtime"
    hostile_publication(folder, sleeper.pid)
    node = h100_node(1, pids=[sleeper.pid], process_memory_bytes=72 * GIB)
    env = fake_nvml(node, base=cli_env) | {"GPU_AUDIT_RUNTIME_DIR": str(folder)}
    done = gpu_audit(["scan", "--json", "--no-report"], env, tmp_path)
    assert done.returncode in (0, 1, 2), done.stderr
    doc = json.loads(done.stdout)
    (process,) = doc["processes"]
    allocator = process["allocator"]
    assert allocator["fragmentation_pct"] is None and allocator["reserved_bytes"] is None
    assert allocator["allocated_bytes"] is None and allocator["requested_bytes"] == 40 * GIB
    assert any("malformed figures dropped" in e["message"] for e in doc["probe_errors"])
    text = gpu_audit(["scan", "--no-report"], env, tmp_path)
    assert "inf%" not in text.stdout and "TiB" not in text.stdout, text.stdout
    assert "-45" not in text.stdout


@pytest.mark.parametrize("major", ["\u00b2", HUGE])
def test_a_hostile_schema_number_hides_no_other_publication(major, sleeper, tmp_path):
    folder = tmp_path / "runtime"
    hostile_publication(folder, sleeper.pid)
    odd = folder / "1.json"
    odd.write_text(json.dumps({"schema": f"gpu-audit.monitor/{major}", "pid": 1}))
    odd.chmod(0o600)
    published = read_publications([folder])
    assert [p.pid for p in published.publications] == [sleeper.pid]
    (skipped,) = published.skipped
    assert "which this gpu-audit cannot read" in skipped.reason and len(skipped.reason) < 200


# --- numbers read by rules, hooks and validate's flags -------------------------------------------


def test_a_hostile_cuda_driver_version_in_a_document_is_no_crash(saved_scan, tmp_path, cli_env):
    path = saved_scan(cuda_driver_version=f"12.{HUGE}")
    done = gpu_audit(["scan", "--from", str(path), "--no-report"], cli_env, tmp_path)
    assert done.returncode in (0, 1, 2), done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_hostile_cuda_visible_devices_is_judged_not_a_crash(saved_scan, tmp_path, cli_env):
    env = {**cli_env, "CUDA_VISIBLE_DEVICES": HUGE}
    done = gpu_audit(["scan", "--json", "--from", str(saved_scan()), "--no-report"], env,
                     tmp_path)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("uid", [HUGE, "\u0663", "12a"])
def test_a_hostile_job_uid_names_no_user(uid):
    from gpu_audit.hooks.slurm import job_user

    assert job_user({"SLURM_JOB_UID": uid}, None) is None


@pytest.mark.parametrize(("value", "words"), [
    (HUGE, "expected whole MiB values"),
    ("\u0663\u0662", "expected whole MiB values"),
    (",".join(str(21 + i) for i in range(40)), "at most 16 values"),
])
def test_hostile_max_split_values_are_refused(value, words, tmp_path, cli_env):
    done = gpu_audit(["validate", "--device", "cpu", "--max-split-size-mb", value, "--out",
                      str(tmp_path), "--", sys.executable, "-c", "pass"], cli_env, tmp_path)
    refused(done, words)


@pytest.mark.parametrize("device", ["cuda:\u0663", f"cuda:{HUGE}"])
def test_hostile_device_indices_are_refused(device, tmp_path, cli_env):
    done = gpu_audit(["validate", "--device", device, "--out", str(tmp_path), "--",
                      sys.executable, "-c", "pass"], cli_env, tmp_path)
    refused(done, "--device")


@pytest.mark.parametrize("value", [f"{HUGE}:deathsig", "\u0663:deathsig", "-1"])
def test_a_hostile_diag_parent_variable_names_no_parent(value):
    from gpu_audit.diag.lifeline import parse

    assert parse(value) == (None, False)
