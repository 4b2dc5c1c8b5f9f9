"""A plain ``gpu-audit check`` line runs without typer, from the same declarations typer builds the
command from (gpu_audit.cli.declared): the parity test of test_scan_fast_path, for check.

Each matrix line runs once through the plain parser and once through typer (``FAST_PATH`` off),
in two processes on the same fake node; stdout, stderr and the exit code must be the same.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.cli.test_scan_fast_path import _normalised, run_both, saved_node

pytest_plugins = ["tests.fakegpu"]

# What changes between two checks of the same machine, besides what a scan's run changes: how
# long the checks and the stages took (JSON, Nagios perfdata, the terminal checklist's footer).
CHECK_MOVING = [
    (re.compile(r'"duration_s": [\d.]+'), '"duration_s": 0'),
    (re.compile(r"'(duration|scan_duration)'=[\d.]+s"), r"'\1'=0s"),
]


def normalised(text: str) -> str:
    text = _normalised(text)
    for pattern, replacement in CHECK_MOVING:
        text = pattern.sub(replacement, text)
    return text


def assert_same(fast: dict, typer: dict, plain: list[list[str]]) -> dict[tuple[str, ...], int]:
    assert not typer["results"][0]["plain"]  # FAST_PATH off: every line went through typer
    for ours, theirs in zip(fast["results"], typer["results"], strict=True):
        line = ours["line"]
        assert ours["plain"] == (line in plain), line
        assert ours["code"] == theirs["code"], (line, ours["err"], theirs["err"])
        assert normalised(ours["out"]) == normalised(theirs["out"]), line
        assert normalised(ours["err"]) == normalised(theirs["err"]), line
    return {tuple(r["line"]): r["code"] for r in fast["results"]}


@pytest.fixture
def node(fake_nvml, cli_env, tmp_path: Path) -> tuple[dict[str, str], Path]:
    env = {k: v for k, v in cli_env.items()
           if not k.startswith(("SLURM_", "GITHUB_")) and k not in ("CI", "CUDA_VISIBLE_DEVICES")}
    return saved_node(fake_nvml, env, tmp_path)


def test_plain_and_typer_parsing_give_the_same_check_results(node, tmp_path: Path):
    env, saved = node
    doc = str(saved)
    good = tmp_path / "policy.toml"
    good.write_text("min_gpus = 4\nfail_on = \"warning\"\n")
    bad = tmp_path / "bad.toml"
    bad.write_text("min_gpus = 'many'\n")
    missing = str(tmp_path / "missing.json")
    plain = [
        ["check", "--json", "--no-report"],
        ["check", "--no-report"],
        ["-v", "check", "--no-report", "--json"],
        ["check", "--json", "--no-report", "-vv"],
        ["check", "--format", "nagios", "--no-report"],
        ["check", "--format=JSON", "--no-report"],
        ["check", "--format", "terminal", "--no-report"],
        ["check", "--json", "--format", "nagios", "--no-report"],
        ["check", "--format", "xml", "--no-report"],
        ["check", "--json", "--no-report", "--timeout", "2.5"],
        ["check", "--json", "--no-report", "--timeout=86400", "--gpus", "1"],
        ["check", "--json", "--no-report", "--gpus=0,1"],
        ["check", "--json", "--no-report", "--gpus", "9"],
        ["check", "--format", "nagios", "--no-report", "--gpus", "bogus"],
        ["check", "--json", "--no-report", "--no-annotations"],
        ["check", "--json", "--no-report", "--user", "alice"],
        ["check", "--from", doc, "--json", "--no-report"],
        ["check", "--from", doc, "--no-report"],
        ["check", "--from", doc, "--format", "nagios", "--no-report"],
        ["check", "--from", doc, "--json", "--no-report", "--gpus", "1"],
        ["check", "--from", doc, "--no-report", "--fail-on", "warning"],
        ["check", "--from", doc, "--no-report", "--fail-on", "bogus"],
        ["check", "--from", doc, "--format", "nagios", "--no-report", "--fail-on", "bogus"],
        ["check", "--from", doc, "--json", "--no-report", "--policy", str(good)],
        ["check", "--from", doc, "--json", "--no-report", "--policy", str(bad)],
        ["check", "--from", doc, "--json", "--no-report", "--policy", missing],
        ["check", "--from", missing, "--json", "--no-report"],
        ["check", "--from", missing, "--format", "nagios", "--no-report"],
        ["check", "--from", doc, "--json", "--out", "reports"],
        ["check", "--from", doc, "--json", "--no-report", "--junit", "junit.xml"],
        ["check", "--from", doc, "--json", "--no-report", "--junit", "no-folder/junit.xml"],
        ["check", "--from", doc, "--no-report", "--stages", "imports"],
        ["check", "--no-report", "--stages", "bogus"],
        ["check", "--no-report", "--stages", ","],
        ["check", "--from", doc, "--no-report", "--diag", "1"],
        ["check", "--no-report", "--spool", "spool"],
        ["check", "--from", doc, "--json", "--no-report", "--prometheus", "check.prom"],
        ["check", "--from", doc, "--format", "nagios", "--no-report",
         "--prometheus", "no-folder/check.prom"],
        ["check", "--slurm", "bogus"],
        ["check", "--slurm", "healthcheck"],
        ["check", "--slurm", "healthcheck", "--gpus", "0", "--timeout", "3"],
        ["check", "--slurm", "prolog", "--spool", "spool"],  # no SLURM_JOB_ID: no verdict
        ["check", "--slurm", "prolog", "--json"],
        ["check", "--slurm", "healthcheck", "--prometheus", "check.prom"],
    ]
    for_typer = [
        ["check", "--help"],
        ["check", "-h"],
        ["check", "--bogus"],
        ["check", "--bogus", "--format", "nagios"],
        ["check", "--format=nagios", "extra"],
        ["check", "extra"],
        ["check", "--json", "--json", "--no-report"],
        ["check", "--json=1", "--no-report"],
        ["check", "--diag", "0", "--no-report"],
        ["check", "--diag", "4", "--format", "nagios", "--no-report"],
        ["check", "--diag", "x", "--no-report"],
        ["check", "--diag=1.5", "--no-report"],
        ["check", "--timeout", "nan", "--format", "NAGIOS", "--no-report"],
        ["check", "--timeout", "0", "--json", "--no-report"],
        ["check", "--timeout"],
        ["check", "--policy=", "--json", "--no-report"],
        ["check", "--from", doc, "--user", "-x", "--json", "--no-report"],
        ["check", "--", "--json"],
        ["check", "-x"],
    ]
    fast, typer = run_both(env, tmp_path, plain + for_typer)
    codes = assert_same(fast, typer, plain)
    assert codes[("check", "--format", "xml", "--no-report")] == 3
    assert codes[("check", "--diag", "4", "--format", "nagios", "--no-report")] == 3
    assert codes[("check", "--help")] == 0
    by_line = {tuple(r["line"]): r for r in fast["results"]}
    for line in (("check", "--bogus", "--format", "nagios"),
                 ("check", "--from", missing, "--format", "nagios", "--no-report")):
        assert by_line[line]["out"].startswith("GPU-AUDIT UNKNOWN - "), line
    for mode in ("fast", "typer"):  # the files went where they were asked to, on both paths
        assert list((tmp_path / mode / "reports").iterdir())
        assert (tmp_path / mode / "junit.xml").exists()
        assert b"gpu_audit_check_status" in (tmp_path / mode / "check.prom").read_bytes()


def test_policy_variables_and_files_read_alike_on_both_paths(node, tmp_path: Path):
    env, saved = node
    doc = str(saved)
    policy = tmp_path / "policy.toml"
    policy.write_text("min_gpus = 1\nmin_free_vram_pct = 5\n")
    lines = [
        ["check", "--from", doc, "--json", "--no-report"],
        ["check", "--from", doc, "--json", "--no-report", "--policy", str(policy)],
        ["check", "--from", doc, "--format", "nagios", "--no-report", "--fail-on", "info"],
        ["check", "--from", doc, "--no-report"],
    ]
    for variables in ({"GPU_AUDIT_MIN_GPUS": "4"}, {"GPU_AUDIT_MIN_GPUS": "many"},
                      {"GPU_AUDIT_FAIL_ON": "warning", "GPU_AUDIT_IGNORE": "no-such-check"},
                      {"GPU_AUDIT_FAIL_ON": "info"}):
        folder = tmp_path / "-".join(f"{k}={v}" for k, v in variables.items())
        folder.mkdir()
        fast, typer = run_both({**env, **variables}, folder, lines)
        codes = assert_same(fast, typer, lines)
        if variables.get("GPU_AUDIT_MIN_GPUS") == "many":
            assert set(codes.values()) == {3}, variables


def test_slurm_hooks_read_alike_on_both_paths(node, tmp_path: Path):
    env, saved = node
    job = {**env, "SLURM_JOB_ID": "4711", "SLURM_JOB_GPUS": "1",
           "SLURM_JOB_USER": "someone-else", "SLURM_JOB_UID": str(os.getuid() + 1)}
    lines = [
        ["check", "--slurm", "prolog", "--spool", "spool"],
        ["check", "--slurm", "epilog", "--spool", "spool", "--user", "alice"],
        ["check", "--slurm", "prolog", "--spool", "spool", "--from", str(saved)],
        ["check", "--slurm", "epilog", "--spool=spool", "--gpus", "0,1"],
        ["check", "--slurm", "epilog", "--spool", "spool", "--format", "nagios"],
        ["check", "--slurm", "prolog", "--spool", "spool", "--diag", "1"],
        ["check", "--slurm", "prolog", "--spool", "spool", "--diag", "9"],
        ["check", "--slurm", "healthcheck", "--fail-on", "warning"],
    ]
    fast, typer = run_both(job, tmp_path, lines)
    codes = assert_same(fast, typer, lines[:6] + lines[7:])
    assert codes[("check", "--slurm", "prolog", "--spool", "spool")] == 0
    assert codes[("check", "--slurm", "prolog", "--spool", "spool", "--diag", "1")] == 3


def test_a_plain_check_line_never_loads_typer(node, tmp_path: Path):
    env, saved = node
    fast, _ = run_both(env, tmp_path, [["check", "--json", "--no-report"],
                                       ["check", "--from", str(saved), "--format", "nagios",
                                        "--no-report"]])
    assert [r["plain"] for r in fast["results"]] == [True, True]
    assert fast["typer"] is False
