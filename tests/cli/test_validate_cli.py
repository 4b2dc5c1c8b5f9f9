"""``gpu-audit validate`` flags, configuration and output contract, as a user meets them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cuda_available
from tests.validate.runs import TINY, run_dir, run_validate, state_of


@pytest.mark.parametrize(("args", "message"), [
    (["--max-split-size-mb", "10"], "below the minimum"),
    (["--max-split-size-mb", "64,big"], "whole MiB values"),
    (["--device", "gpu"], "expected auto, cpu, cuda or cuda:N"),
    (["--cycles", "0"], "--cycles 0: must lie between 1 and 1000000000"),
    (["--stage", "warmup"], "unknown stage"),
    (["--alloc-conf", "expandable_segments:yes"], "exactly True or False"),
    (["--alloc-conf", "max_split_size_mb:128", "--max-split-size-mb", "256"], "contradict"),
    (["--emulate-memory", "lots"], "not a size"),
    (["--require", "phi is high"], "METRIC OP NUMBER"),
    (["--workload", "nowhere.py:Loop"], "no such file"),
    (["--progress", "fancy"], "expected auto, bar, plain or none"),
    (["--bogus-flag"], "No such option"),
    (["--run-id", "../elsewhere"], "names a folder"),
])
def test_bad_flags_exit_3_before_any_worker_starts(args: list[str], message: str,
                                                   tmp_path: Path, cli_env: dict) -> None:
    done = run_validate([*args, "--out", str(tmp_path)], cli_env, timeout=60)
    assert done.returncode == 3, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()  # nothing was started


def test_resume_takes_no_plan_flags_and_names_missing_runs(tmp_path: Path,
                                                           cli_env: dict) -> None:
    mixed = run_validate(["--resume", "r", "--cycles", "5", "--out", str(tmp_path)], cli_env)
    assert mixed.returncode == 3 and "drop --cycles" in mixed.stderr
    missing = run_validate(["--resume", "nope", "--out", str(tmp_path)], cli_env)
    assert missing.returncode == 3 and "no validation run found" in missing.stderr


def test_settings_come_from_pyproject(tmp_path: Path, cli_env: dict) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        "[tool.gpu-audit]\nmax_swap_used_gib = 64\n\n"
        f'[tool.gpu-audit.validate]\nworkload = "{TINY}:Counter"\nrequire = ["phi>0.9"]\n'
        'device = "cpu"\nstages = ["smoke"]\n')
    done = run_validate(["--config", str(project / "pyproject.toml"), "--out", str(tmp_path),
                         "--run-id", "r", "--json", "--no-plots"], cli_env)
    assert done.returncode == 2, done.stderr  # Counter's phi is 0.5
    doc = json.loads(done.stdout)
    assert doc["workload"] == f"{TINY}:Counter"
    assert doc["plan"]["requires"] == ["phi>0.9"]
    assert doc["plan"]["gates"]["max_swap_used_bytes"] == 64 * 1024**3
    assert [f["id"] for f in doc["findings"] if f["severity"] == "error"] == [
        "requirement-failed"]
    flags_win = run_validate(["--config", str(project / "pyproject.toml"), "--out",
                              str(tmp_path), "--require", "phi>0.1", "--no-plots"], cli_env)
    assert flags_win.returncode == 0, flags_win.stderr


def test_variables_set_validate_keys_between_the_file_and_the_flags(tmp_path: Path,
                                                                   cli_env: dict) -> None:
    (tmp_path / "gpu-audit.toml").write_text(f'[validate]\nworkload = "{TINY}:Counter"\n'
                                             'cycles = 9\nrequire = ["phi>0.1"]\n')
    env = cli_env | {"GPU_AUDIT_VALIDATE_CYCLES": "4", "GPU_AUDIT_VALIDATE_REQUIRE": "phi>0.9",
                     "GPU_AUDIT_VALIDATE_DEVICE": "cpu", "GPU_AUDIT_VALIDATE_STAGES": "smoke"}
    done = run_validate(["--config", str(tmp_path / "gpu-audit.toml"), "--out", str(tmp_path),
                         "--run-id", "r", "--json", "--no-plots", "--cycles", "3"], env)
    assert done.returncode == 2, done.stderr  # the variable's requirement, over the file's
    doc = json.loads(done.stdout)
    assert doc["plan"]["requires"] == ["phi>0.9"]
    assert doc["plan"]["final_cycles"] == 3  # the flag over the variable
    assert [s["name"] for s in doc["plan"]["stages"]] == ["smoke"]
    assert doc["device"]["requested"] == "cpu"


def test_a_bad_variable_exits_3_naming_it(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(["--out", str(tmp_path)],
                        cli_env | {"GPU_AUDIT_VALIDATE_MAX_RETRIES": "three"})
    assert done.returncode == 3
    assert "environment variable GPU_AUDIT_VALIDATE_MAX_RETRIES: key 'max_retries' must be an " \
           "integer, got 'three'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_variable_out_of_range_exits_3_naming_it_not_the_flag(tmp_path: Path,
                                                                cli_env: dict) -> None:
    done = run_validate(["--out", str(tmp_path)], cli_env | {"GPU_AUDIT_VALIDATE_CYCLES": "-5"})
    assert done.returncode == 3
    assert "environment variable GPU_AUDIT_VALIDATE_CYCLES: key 'cycles' must lie between 1 " \
           "and 1000000000, got -5" in done.stderr
    assert "--cycles" not in done.stderr and "Traceback" not in done.stderr


def test_a_typo_in_the_validate_table_names_file_line_and_key(tmp_path: Path,
                                                              cli_env: dict) -> None:
    (tmp_path / "gpu-audit.toml").write_text('[validate]\ndevice = "cpu"\nmax_retires = 2\n')
    done = run_validate(["--config", str(tmp_path / "gpu-audit.toml"), "--out", str(tmp_path)],
                        cli_env)
    assert done.returncode == 3
    assert "gpu-audit.toml:3: unknown key 'max_retires' (did you mean 'max_retries'?)" in \
        done.stderr


def test_json_document_and_summary_contract(tmp_path: Path, cli_env: dict) -> None:
    args = ["--device", "cpu", "--workload", f"{TINY}:Counter", "--stage", "smoke", "--out",
            str(tmp_path), "--run-id", "r", "--no-plots"]
    done = run_validate([*args, "--json"], cli_env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpu-audit.validate/1"
    assert doc["tool_version"] and doc["generated_at"].endswith("Z")
    assert {"run", "device", "torch", "workload", "plan", "variants", "findings",
            "comparison", "recommendation", "files"} <= doc.keys()
    summary = doc["variants"][0]["stages"][0]["summary"]
    for key, value in summary.items():
        if key.endswith("_bytes") and value is not None:
            assert isinstance(value, int), key
    assert summary["peak_reserved_bytes"] is None  # unknown on the CPU: null, never 0
    assert Path(doc["files"]["report_md"]).is_file()
    text = run_validate(["--resume", "r", "--out", str(tmp_path), "--no-plots"], cli_env)
    assert text.returncode == 0
    assert text.stdout.startswith("gpu-audit validate: PASSED (exit 0)")
    assert "default/smoke" in text.stdout


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour without a GPU")
def test_device_cuda_without_a_gpu_fails_the_first_stage_plainly(tmp_path: Path,
                                                                 cli_env: dict) -> None:
    done = run_validate(["--device", "cuda", "--stage", "imports,smoke", "--out", str(tmp_path),
                         "--run-id", "r", "--no-plots"], cli_env)
    assert done.returncode == 2
    legs = state_of(run_dir(tmp_path, "r"))["legs"]
    assert legs["default/imports"]["failure"] == "cuda"
    assert "CPU-only build" in legs["default/imports"]["reason"] or \
        "no usable CUDA device" in legs["default/imports"]["reason"]
    assert legs["default/smoke"]["status"] == "skipped"


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour without a GPU")
def test_device_auto_without_a_gpu_falls_back_to_the_cpu_with_a_warning(
        tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(["--workload", f"{TINY}:Counter", "--stage", "smoke", "--out",
                         str(tmp_path), "--run-id", "r", "--no-plots", "--json"], cli_env)
    assert done.returncode == 0, done.stderr
    assert "no usable CUDA device" in done.stderr and "running on the CPU" in done.stderr
    doc = json.loads(done.stdout)
    assert doc["device"]["resolved"] == "cpu" and doc["device"]["fallback_reason"]
    assert "cpu-fallback" in {f["id"] for f in doc["findings"]}


@pytest.mark.slow
def test_the_reference_workload_runs_a_few_cycles_of_every_stage(tmp_path: Path,
                                                                 cli_env: dict) -> None:
    done = run_validate(["--device", "cpu", "--cycles", "4", "--out", str(tmp_path), "--run-id",
                         "r", "--json"], cli_env, timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    stages = {s["name"]: s for s in doc["variants"][0]["stages"]}
    assert all(s["status"] == "passed" for s in stages.values())
    run = run_dir(tmp_path, "r")
    from tests.validate.runs import cycles_of

    full = cycles_of(run, "default/full")
    assert full[0]["metrics"]["qubits"] >= 16 and full[0]["metrics"]["norm_error"] < 1e-3
    assert "qubits" not in cycles_of(run, "default/classical")[0]["metrics"]
    assert cycles_of(run, "default/quantum-lite")[0]["metrics"]["qubits"] <= 16


def test_the_summary_wraps_between_words_and_keeps_commands_whole(monkeypatch, capsys):
    import shlex

    from gpu_audit.cli.validate import _print_fix, _print_wrapped

    monkeypatch.setenv("COLUMNS", "80")
    _print_wrapped("No recommendation: the run used the CPU, where PyTorch's CUDA allocator "
                   "settings do nothing, so the variants differ only by chance. Run the sweep "
                   "on a GPU (--device cuda).")
    prose = capsys.readouterr().out
    assert all(len(line) < 80 for line in prose.splitlines())
    assert "(--device cuda)." in prose  # the flag is not broken across lines
    _print_fix("pip install --force-reinstall 'torch==2.13.0' --index-url "
               "https://download.pytorch.org/whl/cu130  # check the build exists")
    fix = capsys.readouterr().out.splitlines()
    assert all(len(line) < 80 for line in fix) and len(fix) > 1
    command = [line.removeprefix("    fix: ").strip().removesuffix("\\")
               for line in fix if not line.strip().startswith("#")]
    assert shlex.split(" ".join(command)) == [
        "pip", "install", "--force-reinstall", "torch==2.13.0", "--index-url",
        "https://download.pytorch.org/whl/cu130"]
