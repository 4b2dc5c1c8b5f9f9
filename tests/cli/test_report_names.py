"""Runs started together never share a report name or a run folder."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpu_audit.errors import UsageError
from gpu_audit.report.files import unique_stem
from gpu_audit.validate.start import start_run
from tests import builders as b
from tests.cli.test_check_cli import saved_scan
from tests.validate.runs import TINY, start_validate


def test_eight_scans_in_one_second_leave_eight_matching_pairs(cli_env, tmp_path):
    # Every saved scan has the same host and the same generated_at second; each its own process.
    saved = [saved_scan(tmp_path, b.scan(processes=[b.process(7000 + i, 512, ["python", "t.py"])]),
                        f"scan{i}.json") for i in range(8)]
    out = tmp_path / "reports"
    procs = [subprocess.Popen([sys.executable, "-m", "gpu_audit", "scan", "--from", str(path),
                               "--out", str(out)], env=cli_env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for path in saved]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1, 2), err
    markdown = sorted(out.glob("scan-*-node1.md"))
    twins = sorted(out.glob("scan-*-node1.json"))
    assert len(markdown) == 8 and len(twins) == 8
    seen = set()
    for md in markdown:
        twin = md.with_suffix(".json")
        (pid,) = [p["pid"] for p in json.loads(twin.read_text())["processes"]]
        assert f"| {pid} " in md.read_text()  # the pair comes from one scan
        seen.add(pid)
    assert seen == {7000 + i for i in range(8)}


def test_one_process_writing_twice_in_a_second_gets_a_new_name(tmp_path):
    first = unique_stem(tmp_path, "scan", "2026-11-22T10:00:00Z", "node1")
    (tmp_path / f"{first}.md").write_text("x")
    second = unique_stem(tmp_path, "scan", "2026-11-22T10:00:00Z", "node1")
    assert second != first and second.endswith("-node1")
    (tmp_path / f"{second}.json").write_text("x")  # either file of a pair takes the name
    assert unique_stem(tmp_path, "scan", "2026-11-22T10:00:00Z", "node1") not in (first, second)


def test_a_run_folder_a_concurrent_start_just_made_is_not_shared(tmp_path):
    from gpu_audit.validate.plan import ValidateOptions, build_plan

    plan = build_plan(ValidateOptions(workload=f"{TINY}:Counter", stages=["smoke"],
                                      device="cpu"))
    (tmp_path / "runs" / "dup").mkdir(parents=True)  # the other start made it, no plan yet
    with pytest.raises(UsageError, match="already exists"):
        start_run(plan, tmp_path, "dup")
    run, _ = start_run(plan, tmp_path)  # generated names still work
    assert run.plan_path.is_file()


def test_two_validates_with_one_run_id_do_not_both_proceed(cli_env, tmp_path):
    args = ["--workload", f"{TINY}:Counter", "--stage", "smoke", "--device", "cpu", "--out",
            str(tmp_path), "--run-id", "dup", "--no-plots"]
    procs = [start_validate(args, cli_env) for _ in range(2)]
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes[0] == 0 and codes[1] == 3, results
    assert any("already exists" in err for _, err in results)
