"""bench/gpu/run.sh: the plumbing of a GPU session, and every flag its commands use.

The GPU machine is scarce: a renamed flag or a broken log must fail here, not there. The
``selftest`` phase runs the real step runner (timeouts, keep-going, budget, logs, the tar and the
summary) on trivial commands; the dry run of every real phase prints its commands, and each
``gpu-audit`` subcommand's and each bench script's flags are checked against its ``--help``.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_SH = REPO / "bench" / "gpu" / "run.sh"
PHASES = ("truth", "tests", "validate", "diag-bench")
OPERATORS = {">", ">>", "<", "|", "||", "&", "&&", ";", "2", "--"}


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GT_", "GPU_AUDIT_")) and k != "OUT"}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), base.get("PYTHONPATH")]))
    return {**base, "GT_PYTHON": sys.executable, "COLUMNS": "200", **extra}


def dry_run(phase: str, **extra: str) -> list[tuple[str, int, str]]:
    done = subprocess.run(["bash", str(RUN_SH), phase], env=env(GT_DRY_RUN="1", **extra),
                          cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    steps = []
    for line in done.stdout.splitlines():
        tag, name, limit, command = line.split("\t", 3)
        assert tag == "STEP"
        steps.append((name, int(limit), command))
    return steps


@functools.cache
def options(*argv: str) -> frozenset[str]:
    """The flags a command's --help lists (lines starting with an option)."""
    done = subprocess.run([*argv, "--help"], env=env(), cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"{argv} --help failed: {done.stderr[-500:]}"
    found = set()
    for line in done.stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith("-"):
            head = re.split(r"\s{2,}", stripped)[0]
            found.update(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", head))
    return frozenset(found)


def invocations(command: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """(the command that owns the flags, the flags) for each gpu-audit or bench script call."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    found = []
    for i, token in enumerate(tokens):
        if token == "gpu_audit" and tokens[i - 1] == "-m":
            owner, rest = (sys.executable, "-m", "gpu_audit", tokens[i + 1]), tokens[i + 2:]
        elif token.endswith(".py") and "bench/" in token:
            owner, rest = (sys.executable, str(REPO / token)), tokens[i + 1:]
        else:
            continue
        flags = []
        for arg in rest:
            if arg in OPERATORS:
                break
            if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", arg):
                flags.append(arg.split("=")[0])
        found.append((owner, flags))
    return found


def test_the_step_runner_logs_times_out_goes_on_and_packs(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    done = subprocess.run(["bash", str(RUN_SH), "selftest"], capture_output=True, text=True,
                          env=env(OUT=str(out), GT_WORK=str(work), GT_NO_WHEELS="1"),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "gt-selftest.tar.gz", "summary.txt", "versions.txt"]
    rows = [line.split() for line in (out / "summary.txt").read_text().splitlines()[1:]]
    assert [(r[0], r[2]) for r in rows] == [
        ("0", "ok"), ("7", "fails"), ("0", "big-file"), ("124", "times-out"),
        ("skip", "no-time-left")]
    assert 3 <= int(rows[3][1].rstrip("s")) <= 8  # stopped at its own limit
    versions = (out / "versions.txt").read_text()
    assert "phase: selftest" in versions and "gpu-audit: gpu-audit " in versions
    with tarfile.open(out / "gt-selftest.tar.gz") as tar:
        names = set(tar.getnames())
        assert {"work/logs/ok.out", "work/logs/ok.err", "work/logs/fails.rc",
                "work/versions.txt", "work/summary.txt"} <= names
        assert tar.extractfile("work/logs/ok.err").read() == b"err\n"
        assert tar.extractfile("work/logs/fails.rc").read() == b"7\n"
        assert "work/big.bin" in names


def test_a_tar_too_big_for_the_trip_back_leaves_out_the_largest_files(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    done = subprocess.run(["bash", str(RUN_SH), "selftest"], capture_output=True, text=True,
                          env=env(OUT=str(out), GT_WORK=str(work), GT_NO_WHEELS="1",
                                  GT_MAX_TAR_MB="0", GT_ONLY="ok big-file"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "left out of the tar (over 1 MiB each): 1 files" in (out / "summary.txt").read_text()
    with tarfile.open(out / "gt-selftest.tar.gz") as tar:
        names = set(tar.getnames())
        assert "work/big.bin" not in names
        assert {"work/left-out.txt", "work/logs/ok.out"} <= names


def test_only_the_named_steps_run(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(RUN_SH), "selftest"], capture_output=True, text=True,
                          env=env(OUT=str(out), GT_WORK=str(tmp_path / "w"), GT_NO_WHEELS="1",
                                  GT_ONLY="fails ok"), timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in (out / "summary.txt").read_text().splitlines()[1:]]
    assert [r[2] for r in rows] == ["ok", "fails"]


def test_without_out_it_refuses(tmp_path):
    done = subprocess.run(["bash", str(RUN_SH), "selftest"], capture_output=True, text=True,
                          env=env(GT_WORK=str(tmp_path / "w")), timeout=60)
    assert done.returncode == 3 and "OUT" in done.stderr
    done = subprocess.run(["bash", str(RUN_SH), "no-such-phase"], capture_output=True,
                          text=True, env=env(), timeout=60)
    assert done.returncode == 3 and "usage" in done.stderr


@pytest.mark.parametrize("phase", PHASES)
def test_every_flag_a_phase_uses_exists(phase):
    steps = dry_run(phase)
    assert len({name for name, _, _ in steps}) == len(steps), "step names must be unique"
    checked = 0
    for name, limit, command in steps:
        assert 0 < limit <= 540, name
        for owner, flags in invocations(command):
            unknown = set(flags) - options(*owner)
            assert not unknown, f"{name}: {' '.join(owner[1:])} has no {sorted(unknown)}"
            checked += 1
        for path in re.findall(r"(?<![\w/])tests/\S+", command):
            assert (REPO / path).exists(), f"{name}: {path} does not exist"
            checked += 1
    assert checked >= 3


def test_the_live_scan_script_uses_existing_flags():
    text = (REPO / "bench" / "gpu" / "live_scan.sh").read_text()
    calls = [line.replace('"$PY"', "python3") for line in text.splitlines()
             if '"$PY"' in line and not line.lstrip().startswith("#")]
    joined = " ".join(calls).replace("\\", " ")
    checked = 0
    for owner, flags in invocations(joined.replace(" python3 ", " ; python3 ")):
        assert not set(flags) - options(*owner), (owner, flags)
        checked += 1
    assert checked >= 4


def test_the_shell_scripts_parse():
    for script in sorted((REPO / "bench" / "gpu").glob("*.sh")):
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, f"{script.name}: {done.stderr}"


def test_the_readme_calls_fit_the_run_tool():
    """Each call's phases, with their budgets and the time they keep for packing, end within
    the call's timeout; every phase is called."""
    text = (REPO / "bench" / "gpu" / "README.md").read_text()
    calls = re.findall(r'^run\(command="(.*)", carry=\["\.whl"\], timeout_s=(\d+)\)$', text,
                       flags=re.MULTILINE)
    assert calls
    budgets = dict(re.findall(r"^  ([a-z-]+)\) DEFAULT_BUDGET=(\d+) ;;", RUN_SH.read_text(),
                              flags=re.MULTILINE))
    called = []
    for command, timeout in calls:
        assert len(command) <= 2000 and int(timeout) <= 600
        runs = re.findall(r"(?:GT_BUDGET_S=(\d+) )?(?:OUT=\S+ )?bash bench/gpu/run\.sh ([a-z-]+)",
                          command)
        assert runs, command
        total = 0
        for budget, phase in runs:
            assert phase in PHASES
            called.append(phase)
            total += int(budget or budgets[phase]) + 20  # the phase ends before the call
        assert total <= int(timeout), command
    assert sorted(set(called)) == sorted(PHASES)


def test_named_tests_are_rerun_alone_and_diag_s_on_one_worker():
    """GT_TESTS re-runs what failed on a lease: the named tests only, diag's apart."""
    ctrl_c = "tests/diag/test_diag_gpu.py::test_ctrl_c_frees_the_gpu"
    script = "tests/validate/test_validate_script.py"
    steps = {name: command for name, _, command in dry_run("tests", GT_TESTS=f"{ctrl_c} {script}")}
    assert set(steps) == {"pytest-gpu", "pytest-gpu-diag"}
    assert steps["pytest-gpu"].split()[-1] == script and "-n 4" in steps["pytest-gpu"]
    assert steps["pytest-gpu-diag"].split()[-1] == ctrl_c and "-n 0" in steps["pytest-gpu-diag"]
    only_diag = dry_run("tests", GT_TESTS=ctrl_c)
    assert [name for name, _, _ in only_diag] == ["pytest-gpu-diag"]
