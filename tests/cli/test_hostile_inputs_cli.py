"""Hostile values and a hostile environment, through the command line as a user meets them:
each is a clear one-line error with exit 3 (or works), never "internal error" or a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HUGE_INT = "9" * 5000


def gpu_audit(args: list[str], env: dict[str, str], cwd: Path, **kwargs) -> \
        subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_audit", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120, **kwargs)


def assert_one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("gpu-audit:")]
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], done.stderr


def assert_no_crash(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode in (0, 1, 2, 3), done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(("text", "words"), [
    (f"min_free_vram_pct = {HUGE_INT}\n", ["gpu-audit.toml", "4300 digits"]),
    (f"min_free_vram_pct = {'9' * 400}\n", ["gpu-audit.toml:1", "min_free_vram_pct", "too large"]),
    ("max_swap_used_gib = 1e300\n", ["gpu-audit.toml:1", "max_swap_used_gib", "too large"]),
    ("min_free_vram_pct = nan\n", ["gpu-audit.toml:1", "finite"]),
    ("a = " + "[" * 3000 + "]" * 3000 + "\n", ["gpu-audit.toml", "nested too deeply"]),
    ('ignore = ["gpu-tempreature"]\n', ["gpu-audit.toml:1", "unknown finding or check id"]),
])
def test_bad_numbers_and_nesting_in_the_configuration(text, words, tmp_path, cli_env):
    (tmp_path / "gpu-audit.toml").write_text(text)
    assert_one_line_error(gpu_audit(["scan", "--timeout", "0.5"], cli_env, tmp_path), *words)


@pytest.mark.parametrize("command", ["scan", "check"])
def test_deeply_nested_json_from_a_saved_document(command, tmp_path, cli_env):
    (tmp_path / "deep.json").write_text("[" * 3000 + "]" * 3000)
    done = gpu_audit([command, "--from", "deep.json"], cli_env, tmp_path)
    assert_one_line_error(done, "deep.json", "nested too deeply")


def test_a_pyproject_above_the_working_folder_that_is_not_ours_is_skipped(tmp_path, cli_env):
    (tmp_path / "pyproject.toml").write_text("tool = 1\n")
    work = tmp_path / "work"
    work.mkdir()
    assert_no_crash(gpu_audit(["scan", "--timeout", "0.5"], cli_env, work))
    chosen = gpu_audit(["scan", "--timeout", "0.5", "--config", "../pyproject.toml"], cli_env,
                       work)
    assert_one_line_error(chosen, "pyproject.toml", "'tool' must be a table")


@pytest.mark.parametrize("args", [["scan", "--timeout", "nan"], ["scan", "--timeout", "inf"],
                                  ["check", "--timeout", "1e999"],
                                  ["scan", "--timeout", "100000"],
                                  ["validate", "--hang-factor", "nan"],
                                  ["validate", "--hang-min", "inf"],
                                  ["validate", "--retry-backoff", "-nan"]])
def test_non_finite_and_out_of_range_flags_are_refused_as_parsed(args, tmp_path, cli_env):
    done = gpu_audit(args, cli_env, tmp_path)
    assert done.returncode == 3, done.stderr
    assert "Invalid value for" in done.stderr and "Traceback" not in done.stderr


def test_a_non_finite_validate_setting_in_the_configuration(tmp_path, cli_env):
    (tmp_path / "gpu-audit.toml").write_text("[validate]\nhang_factor = nan\n")
    done = gpu_audit(["validate", "--device", "cpu"], cli_env, tmp_path)
    assert_one_line_error(done, "gpu-audit.toml:2: key 'hang_factor'", "finite")


def test_allocator_values_of_thousands_of_digits(tmp_path, cli_env):
    env = {**cli_env, "PYTORCH_CUDA_ALLOC_CONF": f"max_split_size_mb:{HUGE_INT}"}
    done = gpu_audit(["scan", "--timeout", "0.5", "--json"], env, tmp_path)
    assert_no_crash(done)
    assert "max_split_size_mb" in done.stdout


def test_stdout_closed(tmp_path, cli_env):
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "rules"], stderr=subprocess.PIPE,
                          text=True, env=cli_env, cwd=tmp_path, timeout=60,
                          preexec_fn=lambda: os.close(1))
    assert_one_line_error(done, "standard output is closed")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_device(tmp_path, cli_env):
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "gpu_audit", "rules"], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=cli_env, cwd=tmp_path,
                              timeout=60)
    assert_one_line_error(done, "No space left on device")


def test_explain_on_an_ascii_terminal(tmp_path, cli_env):
    log = tmp_path / "job.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                   "GPU 0 has a total capacity of 7.79 GiB of which 5.31 MiB is free. "
                   "caf\u00e9 \u201cx\u201d\n", encoding="utf-8")
    done = gpu_audit(["explain", str(log)], {**cli_env, "PYTHONIOENCODING": "ascii"}, tmp_path)
    assert done.returncode == 1, done.stderr
    assert "cuda-oom" in done.stdout and "caf\\xe9" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_deleted_working_folder(tmp_path, cli_env):
    gone = tmp_path / "gone"
    gone.mkdir()

    def enter_then_delete() -> None:
        os.chdir(gone)
        os.rmdir(gone)

    # No relative entry on the path: the interpreter itself would trip over the missing folder.
    env = {**cli_env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--timeout", "0.5"],
                          capture_output=True, text=True, env=env, timeout=60,
                          preexec_fn=enter_then_delete)
    assert_one_line_error(done, "current folder no longer exists")
