"""``gpu-audit validate`` end to end on the CPU: stages in worker processes, OOMs, hangs,
crashes, ``kill -9`` and Ctrl-C followed by ``--resume``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.validate.runs import (
    REPO,
    TINY,
    assert_each_cycle_once,
    cycles_of,
    pid_alive,
    report_of,
    run_dir,
    run_validate,
    signal_after_cycles,
    start_validate,
    state_of,
    wait_for_cycles,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process control is POSIX here")


def tiny(name: str, out: Path, *extra: str) -> list[str]:
    return ["--device", "cpu", "--workload", f"{TINY}:{name}", "--out", str(out),
            "--progress", "plain", "--no-plots", "--retry-backoff", "0", "--run-id", "r", *extra]


def finding_ids(run: Path) -> set[str]:
    return {f["id"] for f in report_of(run)["findings"]}


@pytest.mark.slow
def test_the_whole_plan_with_a_tiny_workload(tmp_path: Path, cli_env: dict) -> None:
    args = tiny("Counter", tmp_path, "--cycles", "5", "--json")
    args.remove("--no-plots")
    done = run_validate(args, cli_env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpu-audit.validate/1"
    assert doc["run"]["status"] == "passed" and doc["run"]["exit_code"] == 0
    stages = doc["variants"][0]["stages"]
    assert [(s["name"], s["status"], s["cycles_done"]) for s in stages] == [
        ("imports", "passed", 0), ("smoke", "passed", 3), ("classical", "passed", 5),
        ("quantum-lite", "passed", 5), ("full", "passed", 5)]
    imports = state_of(run_dir(tmp_path, "r"))["legs"]["default/imports"]["ready"]
    assert imports["torch_version"] and imports["device"] == "cpu"
    run = run_dir(tmp_path, "r")
    for stage, planned in (("smoke", 3), ("classical", 5), ("quantum-lite", 5), ("full", 5)):
        assert_each_cycle_once(run, f"default/{stage}", planned)
        assert (run / "checkpoints" / f"default.{stage}.ckpt").is_file()
    record = cycles_of(run, "default/full")[0]
    assert record["reserved_bytes"] is None and record["rss_bytes"] > 0  # CPU: CUDA figures null
    assert (run / "report.md").read_text().startswith("# gpu-audit validate: PASSED")
    assert (run / "memory.png").read_bytes()[:4] == b"\x89PNG"
    assert "[default/full] passed" in done.stderr  # plain progress lines on stderr
    # A finished run leaves no lock and no scratch folders its workload did not use.
    assert not (run / ".lock").exists()
    assert not (run / "scratch").exists()


def test_an_oom_that_recovers_at_half_the_batch(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(tiny("OomAtFullBatch", tmp_path, "--stage", "smoke,classical",
                             "--cycles", "6"), cli_env)
    assert done.returncode == 0, done.stderr
    run = run_dir(tmp_path, "r")
    records = cycles_of(run, "default/smoke")
    assert [r["batch_scale"] for r in records] == [1.0, 1.0, 0.5]
    assert records[2]["oom_retries"][0]["kind"] == "torch"
    assert "oom-recovered" in finding_ids(run)
    log = (run / "logs" / "default.smoke.log").read_text()
    assert "retry 1/3" in log  # every retry is logged


def test_an_oom_that_does_not_recover_fails_and_saves_state(tmp_path: Path,
                                                            cli_env: dict) -> None:
    done = run_validate(tiny("OomAlways", tmp_path, "--stage", "smoke,classical", "--cycles",
                             "6"), cli_env)
    assert done.returncode == 2
    run = run_dir(tmp_path, "r")
    legs = state_of(run)["legs"]
    assert legs["default/smoke"]["failure"] == "oom"
    assert legs["default/classical"]["status"] == "skipped"
    from gpu_audit.validate.state import load_checkpoint, load_records

    checkpoint = load_checkpoint(run / "checkpoints" / "default.smoke.ckpt")
    assert checkpoint is not None and checkpoint.next_cycle == 1
    assert checkpoint.workload_state == {"count": 1}
    failed = [r for r in load_records(run / "cycles.jsonl")["default/smoke"]
              if r["type"] == "cycle-failed"]
    assert len(failed) == 1 and len(failed[0]["oom_retries"]) == 4  # 3 retries, then gave up
    oom = next(f for f in report_of(run)["findings"] if f["id"] == "oom-unrecovered")
    assert "2.1 GiB allocated by PyTorch" in oom["detail"]  # what memory was in use
    # The message's numbers, torch 2.1's "capacty" included, under the one set of key names.
    memory = legs["default/smoke"]["failure_detail"]["memory"]
    assert memory["capacity_bytes"] == round(3.81 * 1024**3)
    assert memory["free_bytes"] == round(1.20 * 1024**3)
    assert "1.2 GiB free on the device" in oom["detail"]
    assert "3.8 GiB device total" in oom["detail"]
    assert oom["evidence"]["capacity_bytes"] == memory["capacity_bytes"]


def test_the_nvml_assert_is_handled_as_an_oom(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(tiny("MaskedOom", tmp_path, "--stage", "smoke"), cli_env)
    assert done.returncode == 0, done.stderr
    records = cycles_of(run_dir(tmp_path, "r"), "default/smoke")
    assert records[1]["oom_retries"][0]["kind"] == "masked"


def test_a_hanging_cycle_is_stopped_and_located(tmp_path: Path, cli_env: dict) -> None:
    started = time.monotonic()
    done = run_validate(tiny("HangsAtCycle5", tmp_path, "--stage", "classical", "--cycles", "20",
                             "--hang-min", "1"), cli_env)
    assert done.returncode == 2
    assert time.monotonic() - started < 30
    leg = state_of(run_dir(tmp_path, "r"))["legs"]["default/classical"]
    assert leg["failure"] == "hang"
    assert "cycle 5 did not finish within 1 s" in leg["reason"]
    assert "tiny_workloads.py" in leg["reason"] and "in cycle" in leg["reason"]
    assert "stage-hung" in finding_ids(run_dir(tmp_path, "r"))


def test_a_workload_that_does_not_import(tmp_path: Path, cli_env: dict) -> None:
    args = tiny("Workload", tmp_path, "--stage", "imports,smoke")
    args[args.index("--workload") + 1] = "tests.validate.broken_workload:Workload"
    done = run_validate(args, cli_env)
    assert done.returncode == 2
    run = run_dir(tmp_path, "r")
    legs = state_of(run)["legs"]
    assert legs["default/imports"]["failure"] == "import"
    assert "No module named 'gpu_audit_no_such_package'" in legs["default/imports"]["reason"]
    assert legs["default/smoke"]["status"] == "skipped"
    assert "workload-import-failed" in finding_ids(run)
    # No cycle ran, so the report points at no per-cycle log.
    assert not (run / "cycles.jsonl").exists()
    assert report_of(run)["files"]["cycles"] is None
    assert "per-cycle log" not in (run / "report.md").read_text()


def test_a_crash_in_native_code_is_reported_with_where_it_happened(tmp_path: Path,
                                                                    cli_env: dict) -> None:
    done = run_validate(tiny("Segfaults", tmp_path, "--stage", "smoke"), cli_env)
    assert done.returncode == 2
    leg = state_of(run_dir(tmp_path, "r"))["legs"]["default/smoke"]
    assert leg["failure"] == "crash" and leg["signal"] == "SIGSEGV"
    assert "tiny_workloads.py" in leg["reason"]


def test_a_dead_worker_is_explained_from_its_log(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(tiny("AbortsAfterOom", tmp_path, "--stage", "smoke"), cli_env)
    assert done.returncode == 2
    run = run_dir(tmp_path, "r")
    leg = state_of(run)["legs"]["default/smoke"]
    assert leg["signal"] == "SIGABRT"
    assert leg["explanation"][0]["cls"] == "cuda-oom"  # gpu_audit.explain read the log
    died = next(f for f in report_of(run)["findings"] if f["id"] == "worker-died")
    assert "The log says: CUDA out of memory" in died["detail"]


def test_a_failed_requirement_fails_the_stage(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(tiny("LowPhi", tmp_path, "--stage", "smoke", "--require",
                             "mean(phi)>0.3"), cli_env)
    assert done.returncode == 2
    assert "requirement-failed" in finding_ids(run_dir(tmp_path, "r"))


def kill_then_resume(tmp_path: Path, cli_env: dict, victim: str) -> Path:
    """Start a 60-cycle stage, ``kill -9`` the worker or the runner mid-stage, resume."""
    args = tiny("SlowCounter", tmp_path, "--stage", "full", "--cycles", "60")
    runner = start_validate(args, cli_env)
    run = run_dir(tmp_path, "r")
    try:
        wait_for_cycles(run, "default/full", 23)
        worker = state_of(run)["legs"]["default/full"]["worker_pid"]
        os.kill(worker if victim == "worker" else runner.pid, signal.SIGKILL)
        runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    if victim == "worker":
        assert runner.returncode == 2
        assert state_of(run)["legs"]["default/full"]["signal"] == "SIGKILL"
    else:
        assert runner.returncode == -9
        deadline = time.monotonic() + 20
        while pid_alive(worker):  # the orphaned worker notices and leaves by itself
            assert time.monotonic() < deadline, "the worker outlived its runner"
            time.sleep(0.1)
    resumed = run_validate(["--resume", "r", "--out", str(tmp_path), "--progress", "plain",
                            "--no-plots"], cli_env)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming at cycle" in resumed.stderr
    return run


def test_kill_9_of_the_worker_then_resume_loses_and_repeats_no_cycle(tmp_path: Path,
                                                                     cli_env: dict) -> None:
    run = kill_then_resume(tmp_path, cli_env, "worker")
    assert_each_cycle_once(run, "default/full", 60)
    state = state_of(run)
    assert state["resumes"] == 1 and state["legs"]["default/full"]["attempts"] == 2


def test_kill_9_of_the_runner_then_resume_loses_and_repeats_no_cycle(tmp_path: Path,
                                                                     cli_env: dict) -> None:
    run = kill_then_resume(tmp_path, cli_env, "runner")
    assert_each_cycle_once(run, "default/full", 60)
    assert state_of(run)["status"] == "passed"


def test_ctrl_c_saves_state_exits_130_and_resume_finishes(tmp_path: Path,
                                                          cli_env: dict) -> None:
    runner = start_validate(tiny("SlowCounter", tmp_path, "--stage", "full", "--cycles", "60"),
                            cli_env)
    run = run_dir(tmp_path, "r")
    stderr = signal_after_cycles(runner, run, "default/full", 17, signal.SIGINT)
    assert runner.returncode == 130, stderr
    assert "stopping after the current cycle" in stderr
    state = state_of(run)
    assert state["status"] == "interrupted"
    leg = state["legs"]["default/full"]
    from gpu_audit.validate.state import load_checkpoint

    checkpoint = load_checkpoint(run / "checkpoints" / "default.full.ckpt")
    assert checkpoint is not None and checkpoint.next_cycle == leg["cycles_done"]  # saved
    resumed = run_validate(["--resume", "r", "--out", str(tmp_path), "--no-plots"], cli_env)
    assert resumed.returncode == 0, resumed.stderr
    assert_each_cycle_once(run, "default/full", 60)


def test_an_allocator_value_gets_both_variables_and_a_cpu_sweep_runs_once(
        tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(tiny("Counter", tmp_path, "--stage", "smoke", "--max-split-size-mb",
                             "128,none", "--json"), cli_env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    envs = [v["allocator"]["env"] for v in doc["variants"]]
    assert envs[0] == {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128",
                       "PYTORCH_ALLOC_CONF": "max_split_size_mb:128"}
    # On the CPU the variants would be one run: said before the first stage, run once.
    assert "only max-split-128 runs" in done.stderr.split("started")[0]
    assert [s["status"] for s in doc["variants"][1]["stages"]] == ["skipped"]
    # Allocator settings do nothing on the CPU: no value is recommended, nothing to paste.
    recommendation = doc["recommendation"]
    assert recommendation["label"] is None and recommendation["alloc_conf"] is None
    assert "the run used the CPU" in recommendation["text"]
    assert "PYTORCH_ALLOC_CONF=" not in recommendation["text"]
    assert "alloc-conf-cpu" in {f["id"] for f in doc["findings"]}


def test_the_runner_process_never_imports_torch(tmp_path: Path) -> None:
    script = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from pathlib import Path
from gpu_audit.validate import ValidateOptions, build_plan, run_validation
plan = build_plan(ValidateOptions(stages=["smoke"], device="cpu",
                                  workload="{TINY}:Counter"))
result = run_validation(plan, out_dir=Path({str(tmp_path)!r}), progress="none", plots=False)
assert result.exit_code == 0, result.state
print("torch" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
