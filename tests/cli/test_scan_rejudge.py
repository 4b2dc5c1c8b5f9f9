"""``gpu-audit scan --from FILE`` judges copies of a server afresh, whatever the file says."""

from __future__ import annotations

import json

from tests import builders as b
from tests.cli.test_scan_cli import assert_documented_shape, run_scan, saved_scan

UVICORN_COPIES = [2101, 2202, 2303]


def test_a_saved_scan_without_group_marks_still_gets_the_duplicate_finding(cli_env, tmp_path):
    """An older or hand-edited scan whose processes lost (or carry wrong) duplicate_group
    marks: the three uvicorn copies are grouped again, from their command lines."""
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    doc = json.loads(saved.read_text())
    for process in doc["processes"]:
        if process["pid"] in UVICORN_COPIES:
            del process["duplicate_group"]
        else:
            process["duplicate_group"] = 7  # a lone process wrongly marked
    saved.write_text(json.dumps(doc))

    result = run_scan(["--from", str(saved), "--json", "--no-report"], cli_env, tmp_path)
    assert result.returncode == 1, result.stderr
    rejudged = json.loads(result.stdout)
    assert_documented_shape(rejudged)
    (dup,) = [f for f in rejudged["findings"] if f["id"] == "duplicate-backend"]
    assert [m["pid"] for m in dup["evidence"]["members"]] == UVICORN_COPIES
    assert dup["evidence"]["stop_pids"] == [2202, 2303]
    marks = {p["pid"]: p["duplicate_group"] for p in rejudged["processes"]}
    assert marks == {1201: None, 2101: 1, 2202: 1, 2303: 1, 2404: None}


def test_the_process_table_marks_the_copies_it_finds_itself(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    doc = json.loads(saved.read_text())
    for process in doc["processes"]:
        process["duplicate_group"] = None
    saved.write_text(json.dumps(doc))

    result = run_scan(["--from", str(saved), "--no-report"], cli_env, tmp_path)
    rows = [line for line in result.stdout.splitlines() if "uvicorn" in line and "#1" in line]
    assert len(rows) == 3, result.stdout
