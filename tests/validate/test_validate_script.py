"""``gpu-audit validate [OPTIONS] -- COMMAND...`` on real, unmodified scripts (tests/validate/
scripts/), run as a user runs it: a subprocess, its run folder, its exit code."""

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
    cycles_of,
    raw_cycle_lines,
    report_of,
    run_dir,
    run_validate,
    start_validate,
    state_of,
    wait_for_cycles,
)

SCRIPTS = REPO / "tests" / "validate" / "scripts"
PY = sys.executable
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
LOSS = "loss=loss[=:]\\s*([0-9.eE+-]+)"


def script(name: str) -> str:
    return str(SCRIPTS / name)


def validate(tmp_path: Path, env: dict[str, str], run_id: str, *args: str,
             timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], Path]:
    done = run_validate(["--device", "cpu", "--no-plots", "--out", str(tmp_path),
                         "--run-id", run_id, *args], env, timeout=timeout)
    return done, run_dir(tmp_path, run_id)


def stage_doc(report: dict, name: str) -> dict:
    return next(s for s in report["variants"][0]["stages"] if s["name"] == name)


def findings_of(report: dict, finding_id: str) -> list[dict]:
    return [f for f in report["findings"] if f["id"] == finding_id]


def test_plain_torch_loop_counts_optimizer_steps_and_is_stopped_cleanly(tmp_path, cli_env):
    """A training loop that never heard of gpu-audit and runs 100000 steps on its own: cycles
    come from the optimizer hook, and the stage ends it after its cycles, between steps."""
    done, run = validate(tmp_path, cli_env, "plain", "--cycles", "6", "--disable-quantum",
                         "--metric", LOSS, "--require", "last(loss)<1",
                         "--", PY, script("train_plain.py"), "--sleep", "0.01")
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(run)
    assert [s["name"] for s in report["variants"][0]["stages"]] == ["imports", "smoke",
                                                                     "classical"]
    records = cycles_of(run, "default/classical")
    assert [r["cycle"] for r in records] == list(range(6))
    assert {r["source"] for r in records} == {"optimizer"}
    assert all(r["rss_bytes"] > 10_000_000 for r in records)  # the script's own RSS (torch)
    assert all(isinstance(r["metrics"]["loss"], float) for r in records)
    log = (run / "logs" / "default.classical.log").read_text()
    assert "step 5 loss=" in log and "step 6 " not in log  # the 6th step finished, no 7th
    assert "training finished" not in log
    warnings = [f["title"] for f in findings_of(report, "stage-warning")]
    assert any("no {cycles} placeholder" in w for w in warnings)
    assert any("optimizer steps" in w for w in warnings)
    assert stage_doc(report, "imports")["status"] == "passed"


def test_seed_shaped_script_placeholders_pattern_and_require(tmp_path, cli_env):
    """The seed's shape: --cycles N and the quantum flag from placeholders, a cycle per printed
    line, a --require gate on the parsed loss that passes and one that fails."""
    command = ["--", PY, script("seed_like.py"), "--cycles", "{cycles}", "{quantum}",
               "--loss", "3"]
    done, run = validate(tmp_path, cli_env, "seed", "--cycles", "4", "--stage",
                         "smoke,quantum-lite,full", "--quantum-lite", "--cycle-pattern",
                         r"^cycle \d+", "--metric", LOSS, "--metric", r"phi=phi=(\S+)",
                         "--require", "mean(loss)<2", "--require", "min(phi)>0.5", *command)
    assert done.returncode == 0, done.stdout + done.stderr
    for leg, cycles in (("default/smoke", 3), ("default/quantum-lite", 4)):
        records = cycles_of(run, leg)
        assert [r["cycle"] for r in records] == list(range(cycles))
        assert records[1]["metrics"] == {"loss": 1.5, "phi": 0.61}
        assert {r["source"] for r in records} == {"pattern"}
    assert "quantum mode: lite" in (run / "logs" / "default.smoke.log").read_text()
    plan = report_of(run)["plan"]
    assert [s["name"] for s in plan["stages"]] == ["smoke", "quantum-lite"]  # full == twin

    done, run = validate(tmp_path, cli_env, "seed-fails", "--cycles", "3", "--stage", "smoke",
                         "--disable-quantum", "--cycle-pattern", r"^cycle \d+",
                         "--metric", LOSS, "--require", "mean(loss)<0.5", *command)
    assert done.returncode == 2
    report = report_of(run)
    assert "quantum mode: off" in (run / "logs" / "default.smoke.log").read_text()
    failed = findings_of(report, "requirement-failed")
    assert failed and "mean(loss)<0.5" in failed[0]["title"]


def test_unknown_placeholder_and_bad_metric_are_usage_errors(tmp_path, cli_env):
    done, _ = validate(tmp_path, cli_env, "bad", "--", PY, script("seed_like.py"),
                       "--cycles", "{cycle}")
    assert done.returncode == 3
    assert "unknown placeholder {cycle}" in done.stderr and "Traceback" not in done.stderr
    done, _ = validate(tmp_path, cli_env, "bad2", "--metric", "loss", "--", PY, "x.py")
    assert done.returncode == 3 and "NAME=REGEX" in done.stderr
    assert not (tmp_path / "runs" / "bad").exists()


def test_oom_in_the_output_is_diagnosed_with_the_classifier(tmp_path, cli_env):
    done, run = validate(tmp_path, cli_env, "oom", "--stage", "smoke", "--cycle-pattern",
                         "^cycle", "--", PY, script("oom_script.py"))
    assert done.returncode == 2
    finding = findings_of(report_of(run), "oom-unrecovered")[0]
    assert finding["evidence"]["requested_bytes"] == 2 * 1024**3
    assert "cannot retry half a step" in finding["detail"]
    assert "Excerpt of the log" in finding["detail"] and "Tried to allocate" in finding["detail"]
    assert "--max-split-size-mb 128,512" in finding["remedy"]
    explanation = stage_doc(report_of(run), "smoke")["worker"]["explanation"]
    assert explanation[0]["cls"].startswith("cuda-oom") or "oom" in explanation[0]["cls"]


def test_nccl_failure_exit_1_names_the_root_cause(tmp_path, cli_env):
    done, run = validate(tmp_path, cli_env, "nccl", "--stage", "smoke", "--cycle-pattern",
                         "^cycle", "--", PY, script("nccl_script.py"))
    assert done.returncode == 2
    report = report_of(run)
    finding = next(f for f in report["findings"] if f["severity"] == "critical")
    assert finding["evidence"]["command_exit_code"] == 1
    assert "NCCL" in finding["detail"] and "Excerpt of the log" in finding["detail"]
    assert "NCCL_DEBUG=INFO" in finding["remedy"]
    assert stage_doc(report, "smoke")["worker"]["explanation"][0]["cls"] == "nccl"


def test_a_hanging_script_is_stopped_by_the_watchdog(tmp_path, cli_env):
    began = time.monotonic()
    done, run = validate(tmp_path, cli_env, "hang", "--stage", "smoke", "--cycle-pattern",
                         "^cycle", "--hang-min", "1", "--hang-factor", "2", "--",
                         PY, script("hang_script.py"))
    assert done.returncode == 2
    assert time.monotonic() - began < 30
    finding = findings_of(report_of(run), "stage-hung")[0]
    assert "printed nothing" in finding["detail"]
    assert 'hang_script.py", line' in finding["detail"]  # where the script was waiting
    assert state_of(run)["legs"]["default/smoke"]["cycles_done"] == 2


def test_torchrun_two_ranks_gloo_give_two_streams(tmp_path, cli_env):
    if not Path(TORCHRUN).exists():
        pytest.skip("torchrun is not installed beside this Python")
    done, run = validate(tmp_path, cli_env, "ddp", "--stage", "smoke", "--metric", LOSS,
                         "--", TORCHRUN, "--nproc-per-node", "2", script("ddp_gloo.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    streams = sorted(p.name for p in (run / "streams" / "default.smoke" / "attempt-1")
                     .glob("*.jsonl"))
    assert streams == ["rank-0.jsonl", "rank-1.jsonl"]
    records = cycles_of(run, "default/smoke")
    assert [r["cycle"] for r in records] == [0, 1, 2]
    assert all("rank-1" in r.get("ranks", {}) for r in records[1:])
    hello = [json.loads(p.read_text().splitlines()[0])
             for p in (run / "streams" / "default.smoke" / "attempt-1").glob("*.jsonl")]
    assert sorted(h["rank"] for h in hello) == [0, 1] and {h["world_size"] for h in hello} == {2}


def test_monitor_step_counts_and_an_existing_sitecustomize_still_runs(tmp_path, cli_env):
    """monitor.step() outranks everything; the environment's own sitecustomize is chained."""
    own = tmp_path / "own_site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("print('OWN SITECUSTOMIZE RAN', flush=True)\n")
    body = tmp_path / "stepper.py"
    body.write_text("from gpu_audit import monitor\n"
                    "for i in range(100):\n"
                    "    print(f'work {i} loss={1.0 / (i + 1)}', flush=True)\n"
                    "    monitor.step()\n")
    env = dict(cli_env, PYTHONPATH=cli_env["PYTHONPATH"] + os.pathsep + str(own))
    done, run = validate(tmp_path, env, "mon", "--stage", "smoke", "--metric", LOSS,
                         "--", PY, str(body))
    assert done.returncode == 0, done.stdout + done.stderr
    records = cycles_of(run, "default/smoke")
    assert [(r["cycle"], r["source"]) for r in records] == [(0, "monitor"), (1, "monitor"),
                                                            (2, "monitor")]
    assert records[2]["metrics"]["loss"] == pytest.approx(1 / 3)
    log = (run / "logs" / "default.smoke.log").read_text()
    assert "OWN SITECUSTOMIZE RAN" in log and "work 3 " not in log


def test_no_cycles_seen_means_the_stage_is_judged_whole(tmp_path, cli_env):
    body = tmp_path / "plain.sh"
    body.write_text("#!/bin/sh\necho 'final loss=0.25'\n")
    body.chmod(0o755)
    done, run = validate(tmp_path, cli_env, "whole", "--stage", "smoke", "--metric", LOSS,
                         "--require", "last(loss)<1", "--", str(body))
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(run)
    assert any("judged as a whole" in f["title"] for f in findings_of(report, "stage-warning"))
    (record,) = cycles_of(run, "default/smoke")
    assert record["whole_stage"] and record["metrics"] == {"loss": 0.25}


def test_config_table_gives_command_metrics_and_quantum_words(tmp_path, cli_env):
    config = tmp_path / "gpu-audit.toml"
    config.write_text(
        "[validate]\n"
        f"command = [{json.dumps(PY)}, {json.dumps(script('seed_like.py'))}, '--cycles', "
        "'{cycles}', '{quantum}']\n"
        "cycle_pattern = '^cycle'\n"
        "stages = ['smoke']\n"
        "[validate.metrics]\n"
        "phi = 'phi=(\\S+)'\n"
        "[validate.quantum_flags]\n"
        "lite = '--quantum-lite'\n")
    done, run = validate(tmp_path, cli_env, "cfg", "--config", str(config),
                         "--require", "min(phi)>0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["metrics"]["phi"] for r in cycles_of(run, "default/smoke")] == [0.6, 0.61, 0.62]


def test_kill_9_of_the_runner_then_resume_reruns_only_that_stage(tmp_path, cli_env):
    command = ["--", PY, script("seed_like.py"), "--cycles", "{cycles}", "--sleep", "0.1",
               "{resume}"]
    config = tmp_path / "gpu-audit.toml"
    config.write_text("[validate]\nresume_flag = '--resume-from {run_dir}/state'\n")
    args = ["--device", "cpu", "--no-plots", "--out", str(tmp_path), "--run-id", "kill",
            "--config", str(config), "--stage", "smoke,classical", "--cycles", "12",
            "--disable-quantum", "--cycle-pattern", "^cycle", *command]
    runner = start_validate(args, cli_env)
    run = run_dir(tmp_path, "kill")
    try:
        wait_for_cycles(run, "default/classical", 3)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert raw_cycle_lines(run, "default/classical") < 12
    done = run_validate(["--out", str(tmp_path), "--resume", "kill", "--no-plots"], cli_env)
    assert done.returncode == 0, done.stdout + done.stderr
    legs = state_of(run)["legs"]
    assert legs["default/smoke"]["attempts"] == 1  # passed before the kill: not repeated
    assert legs["default/classical"]["attempts"] == 2
    records = cycles_of(run, "default/classical")
    assert [r["cycle"] for r in records] == list(range(12))
    assert {r["attempt"] for r in records} == {2}
    assert raw_cycle_lines(run, "default/classical") == 12  # the first attempt's are gone
    assert [r["cycle"] for r in cycles_of(run, "default/smoke")] == [0, 1, 2]
    log = (run / "logs" / "default.classical.log").read_text()
    assert "resume from: None" in log and f"resume from: {run}/scratch/" in log


@pytest.mark.gpu
def test_emulate_memory_caps_the_script_before_its_first_allocation(tmp_path, cli_env):
    """8 x 256 MiB kept under a 1 GiB cap: the cap is in force from the first allocation.

    (The full stage, whose cycle count --cycles sets: the smoke stage's 3 cycles would hold
    768 MiB, under the cap.)"""
    done, run = validate_on(tmp_path, cli_env, "cap", "cuda", "--stage", "full", "--cycles",
                            "8", "--disable-quantum", "--emulate-memory", "1GiB",
                            "--retry-backoff", "0", "--",
                            PY, script("alloc_past.py"), "--cycles", "{cycles}")
    assert done.returncode == 2, done.stdout + done.stderr
    finding = findings_of(report_of(run), "oom-unrecovered")[0]
    assert finding["evidence"]["cycles_done"] <= 4  # 5 x 256 MiB never fits under 1 GiB
    records = cycles_of(run, "default/full")
    # Fast steps are sampled (a read per interval, the first cycle's always): not every record
    # carries the allocator's figures.
    assert records and records[0]["reserved_bytes"] is not None
    ready = state_of(run)["legs"]["default/full"]["ready"]
    assert ready["memory_fraction"] is not None and ready["cuda_visible_devices"] is not None


@pytest.mark.gpu
def test_allocator_settings_reach_the_script_and_are_read_back(tmp_path, cli_env):
    done, run = validate_on(tmp_path, cli_env, "conf", "cuda", "--stage", "smoke",
                            "--alloc-conf", "max_split_size_mb:128", "--",
                            PY, script("alloc_past.py"), "--cycles", "{cycles}")
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(run)
    assert not findings_of(report, "alloc-conf-not-applied")
    ready = state_of(run)["legs"]["default/smoke"]["ready"]
    assert ready["alloc_env"] == {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128",
                                  "PYTORCH_ALLOC_CONF": "max_split_size_mb:128"}
    assert ready["allocator_settings"] is not None


def validate_on(tmp_path: Path, env: dict[str, str], run_id: str, device: str, *args: str
                ) -> tuple[subprocess.CompletedProcess[str], Path]:
    done = run_validate(["--device", device, "--no-plots", "--out", str(tmp_path),
                         "--run-id", run_id, *args], env, timeout=300)
    return done, run_dir(tmp_path, run_id)


def test_an_oom_reruns_the_stage_at_half_the_batch(tmp_path, cli_env):
    """{batch} 32 runs out of memory, 16 too, 8 fits: the stage passes, and says so."""
    command = ["--", PY, script("oom_script.py"), "--batch", "{batch}", "--cycles", "{cycles}"]
    done, run = validate(tmp_path, cli_env, "batch", "--stage", "smoke", "--cycle-pattern",
                         "^cycle", "--batch", "32", *command)
    assert done.returncode == 0, done.stdout + done.stderr
    records = cycles_of(run, "default/smoke")
    assert [r["cycle"] for r in records] == [0, 1, 2]
    assert {r["batch_scale"] for r in records} == {0.25}
    assert [e["batch"] for e in records[0]["oom_retries"]] == [32, 16]
    finding = findings_of(report_of(run), "oom-recovered")[0]
    assert finding["evidence"]["oom_retries"] == 2

    done, run = validate(tmp_path, cli_env, "batch-fails", "--stage", "smoke", "--cycle-pattern",
                         "^cycle", "--batch", "32", "--max-retries", "1", *command)
    assert done.returncode == 2
    finding = findings_of(report_of(run), "oom-unrecovered")[0]
    assert "at batch 16 after 1 halving(s)" in finding["detail"]
    done, _ = validate(tmp_path, cli_env, "batch-missing", "--stage", "smoke", *command)
    assert done.returncode == 3 and "--batch N" in done.stderr
