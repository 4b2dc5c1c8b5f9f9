"""``validate -- COMMAND`` on scripts that resume themselves, fail in their own words, or are
missing: run as a user runs it (a subprocess, its run folder, its exit code)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.validate.runs import (
    REPO,
    cycles_of,
    raw_cycle_lines,
    report_of,
    run_dir,
    run_validate,
    start_validate,
    state_of,
    validate_command,
    wait_for_cycles,
)

SCRIPTS = REPO / "tests" / "validate" / "scripts"
PY = sys.executable
RESUME_SELF = str(SCRIPTS / "resume_self.py")


def validate(tmp_path: Path, env: dict[str, str], run_id: str, *args: str
             ) -> tuple[subprocess.CompletedProcess[str], Path]:
    done = run_validate(["--device", "cpu", "--no-plots", "--progress", "plain", "--out",
                         str(tmp_path), "--run-id", run_id, *args], env)
    return done, run_dir(tmp_path, run_id)


def findings_of(report: dict, finding_id: str) -> list[dict]:
    return [f for f in report["findings"] if f["id"] == finding_id]


def stage_doc(report: dict, name: str) -> dict:
    return next(s for s in report["variants"][0]["stages"] if s["name"] == name)


def kill_and_resume(tmp_path: Path, env: dict[str, str], *script_args: str
                    ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A self-resuming run of 30 cycles, its checkpoint every 10, gpu-audit killed with
    SIGKILL past cycle 14, then ``--resume``."""
    config = tmp_path / "gpu-audit.toml"
    config.write_text("[validate]\nresume_flag = '--init_from=resume'\n")
    args = ["--device", "cpu", "--no-plots", "--out", str(tmp_path), "--run-id", "self",
            "--config", str(config), "--stage", "classical", "--cycles", "30",
            "--disable-quantum", "--", PY, RESUME_SELF, "--out_dir", "{run_dir}",
            "--max_iters", "{cycles}", "{resume}", "--sleep", "0.1", "--save_every", "10",
            *script_args]
    runner = start_validate(args, env)
    run = run_dir(tmp_path, "self")
    try:
        wait_for_cycles(run, "default/classical", 14)  # past the checkpoint at 10, before 20
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert 14 <= raw_cycle_lines(run, "default/classical") < 20
    done = run_validate(["--out", str(tmp_path), "--resume", "self", "--no-plots",
                         "--progress", "plain"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, run


def test_a_script_that_resumes_itself_passes_after_kill_9_and_resume(tmp_path, cli_env):
    """It saves its iteration and optimizer every 10 steps; after kill -9 of gpu-audit, the
    resumed stage continues from the checkpoint (iteration 10) to 30: 20 steps, and the stage
    passes as 30 of 30, with one record per cycle in cycles.jsonl."""
    done, run = kill_and_resume(tmp_path, cli_env)
    assert "resuming at cycle 10 of 30" in done.stderr
    leg = state_of(run)["legs"]["default/classical"]
    assert leg["status"] == "passed" and leg["cycles_done"] == 30 and leg["attempts"] == 2
    records = cycles_of(run, "default/classical")
    assert [r["cycle"] for r in records] == list(range(30))
    assert [r["attempt"] for r in records] == [1] * 10 + [2] * 20
    assert raw_cycle_lines(run, "default/classical") == 30  # the first attempt's 10.. are gone
    log = (run / "logs" / "default.classical.log").read_text()
    assert "resuming from iteration 10" in log and "training done" in log
    report = report_of(run)
    assert stage_doc(report, "classical")["cycles_done"] == 30
    warnings = [f["title"] for f in findings_of(report, "stage-warning")]
    assert any("resumed itself at cycle 10 (from the optimizer's step count)" in w
               for w in warnings)


def test_an_argparse_error_is_shown_with_its_own_words(tmp_path, cli_env):
    """The command refuses its arguments before its first step: its usage error is in the
    terminal and first in the finding, with the stage log's path; no phantom cycle."""
    body = tmp_path / "main.py"
    body.write_text("import argparse\n"
                    "parser = argparse.ArgumentParser()\n"
                    "parser.add_argument('--model', default='GRU')\n"
                    "args = parser.parse_args()\n")
    done, run = validate(tmp_path, cli_env, "argparse", "--stage", "smoke", "--",
                         PY, str(body), "--modle", "LSTM")
    assert done.returncode == 2
    error = "main.py: error: unrecognized arguments: --modle LSTM"
    assert error in done.stderr  # the stage's line as it failed
    assert f"error: {error}" in done.stdout  # under the finding in the summary
    report = report_of(run)
    (finding,) = findings_of(report, "workload-error")
    assert finding["detail"].startswith(f"The command's error: {error}")
    assert "argument parser refused the command line" in finding["detail"]
    log = str(run / "logs" / "default.smoke.log")
    assert finding["evidence"]["stage_log"] == log and f"Stage log: {log}" in finding["detail"]
    smoke = stage_doc(report, "smoke")
    assert smoke["cycles_done"] == 0 and "after 0 cycles" in smoke["reason"]
    assert cycles_of(run, "default/smoke") == []
    gate = next(g for g in smoke["gates"] if g["name"] == "cycles-complete")
    assert gate["passed"] is False and gate["detail"] == "0 of 3 cycles completed"


def test_a_failed_torch_load_gives_the_exception_and_the_users_frame(tmp_path, cli_env):
    body = tmp_path / "load_fails.py"
    body.write_text("import torch\n"
                    "class Config:\n"
                    "    pass\n"
                    "def restore(path):\n"
                    "    return torch.load(path)\n"
                    f"torch.save({{'config': Config()}}, {str(tmp_path / 'ckpt.pt')!r})\n"
                    f"restore({str(tmp_path / 'ckpt.pt')!r})\n")
    done, run = validate(tmp_path, cli_env, "unpickle", "--stage", "smoke", "--",
                         PY, str(body))
    assert done.returncode == 2
    (finding,) = findings_of(report_of(run), "workload-error")
    first = finding["detail"].splitlines()[0]
    assert first.startswith("The command's error: _pickle.UnpicklingError: Weights only load")
    assert "UnpicklingError" in done.stdout
    frames = finding["evidence"]["traceback_frames"]
    assert frames and all("File " in line or line.startswith("    ") for line in frames)
    if not finding["evidence"].get("log_excerpt"):  # no explain signature: the plain reading
        assert "raised _pickle.UnpicklingError" in finding["detail"]
        assert f"in your code at {body}:5" in finding["detail"]


def test_a_cuda_only_script_on_the_cpu_is_read_plainly(tmp_path, cli_env):
    body = tmp_path / "cuda_only.py"
    body.write_text("import torch\n"
                    "model = torch.nn.Linear(4, 4)\n"
                    "model = model.cuda()\n")
    done, run = validate(tmp_path, cli_env, "cudaonly", "--stage", "smoke", "--",
                         PY, str(body))
    assert done.returncode == 2
    (finding,) = findings_of(report_of(run), "workload-error")
    assert "Torch not compiled with CUDA enabled" in finding["detail"].splitlines()[0]
    assert "Torch not compiled with CUDA enabled" in done.stderr
    assert f"{body}:3" in finding["detail"] or "log_excerpt" in finding["evidence"]


def test_a_missing_script_fails_the_imports_stage_and_smoke_never_runs(tmp_path, cli_env):
    done, run = validate(tmp_path, cli_env, "missing", "--stage", "imports,smoke", "--",
                         PY, "scripts/nonexistent.py")
    assert done.returncode == 2
    legs = state_of(run)["legs"]
    assert legs["default/imports"]["status"] == "failed"
    assert legs["default/smoke"]["status"] == "skipped"
    (finding,) = findings_of(report_of(run), "workload-import-failed")
    assert "the script 'scripts/nonexistent.py' it runs was not found" in finding["detail"]
    done, run = validate(tmp_path, cli_env, "missing-module", "--stage", "imports,smoke",
                         "--", PY, "-m", "nonexistent_pkg.train")
    assert done.returncode == 2
    (finding,) = findings_of(report_of(run), "workload-import-failed")
    assert "the module 'nonexistent_pkg.train' it runs with -m was not found" \
        in finding["detail"]


def test_a_cycles_overshoot_is_flagged_and_the_command_shown_as_written(tmp_path, cli_env):
    """--max_iters {cycles} where one iteration is 4 optimizer steps: 12 cycles for 3."""
    done, run = validate(tmp_path, cli_env, "over", "--stage", "smoke", "--",
                         PY, RESUME_SELF, "--out_dir", "{run_dir}", "--max_iters", "{cycles}",
                         "--steps_per_iter", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(run)
    (finding,) = findings_of(report, "cycles-overshoot")
    assert finding["evidence"] == {"cycles_run": 12, "cycles_planned": 3}
    assert finding["severity"] == "warning"
    assert report["workload"].endswith(
        "resume_self.py --out_dir {run_dir} --max_iters {cycles} --steps_per_iter 4")


def test_allocator_variants_on_the_cpu_run_once_and_say_so_first(tmp_path, cli_env):
    done, run = validate(tmp_path, cli_env, "cpuvariants", "--stage", "smoke",
                         "--max-split-size-mb", "64,128", "--",
                         PY, str(SCRIPTS / "train_plain.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stderr.index("only max-split-64 runs")
    assert said < done.stderr.index("started")
    legs = state_of(run)["legs"]
    ran = {key for key, leg in legs.items() if leg["attempts"]}
    assert ran == {"max-split-64/smoke"}
    assert legs["max-split-128/smoke"]["status"] == "skipped"
    assert report_of(run)["recommendation"]["text"].startswith("No recommendation")


def test_validate_help_lists_every_placeholder(cli_env):
    from gpu_audit.validate.script.spec import PLACEHOLDERS

    done = subprocess.run(validate_command("--help"), env=dict(cli_env, COLUMNS="200"),
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    text = " ".join(done.stdout.split())
    assert all(f"{{{name}}}" in text for name in PLACEHOLDERS), text


def test_where_a_resume_started_is_inferred_from_the_stages_earlier_progress(tmp_path,
                                                                           cli_env):
    """SGD keeps no step count and the checkpoint's counter has a name of its own: the resumed
    command ran 20 cycles to its {cycles} of 30 and exited 0, and the stage had got past 10
    before, so it resumed at 10."""
    _, run = kill_and_resume(tmp_path, cli_env, "--optimizer", "sgd",
                             "--counter_key", "position")
    leg = state_of(run)["legs"]["default/classical"]
    assert leg["status"] == "passed" and leg["cycles_done"] == 30
    records = cycles_of(run, "default/classical")
    assert [r["cycle"] for r in records if r["attempt"] == 2] == list(range(10, 30))
    assert raw_cycle_lines(run, "default/classical") == 20
    warnings = [f["title"] for f in findings_of(report_of(run), "stage-warning")]
    assert any("resumed itself at cycle 10 (inferred" in w for w in warnings)
