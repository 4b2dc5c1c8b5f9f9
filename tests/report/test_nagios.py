"""Monitoring-plugin output: a status line Nagios and Icinga parse, performance data in the
guidelines' grammar, nothing in the text that could split it."""

from __future__ import annotations

import re

import pytest

from gpu_audit.model import Severity
from gpu_audit.report.nagios import (
    MAX_DETAIL_LINES,
    perf,
    render_scan_nagios,
    status_line,
    unknown_output,
)
from gpu_audit.rules import evaluate, exit_code
from tests import builders as b

# 'label'=value[UOM];[warn];[crit];[min];[max] (trailing empty fields may be dropped)
NUMBER = r"-?\d+(?:\.\d+)?"
PERF_ITEM = re.compile(rf"^'[^'=]+'={NUMBER}(?:s|%|B|c)?(?:;(?:{NUMBER})?){{0,4}}$")
STATUS = re.compile(r"^GPU-AUDIT (OK|WARNING|CRITICAL|UNKNOWN) - ([^|]+?)(?: \| (.*))?$")


def parse(output: str) -> tuple[str, str, list[str], list[str]]:
    """(state, summary, perfdata items, long-output lines), checking the grammar on the way."""
    assert output.endswith("\n")
    first, *rest = output.rstrip("\n").split("\n")
    match = STATUS.match(first)
    assert match, first
    items = match[3].split(" ") if match[3] else []
    for item in items:
        assert PERF_ITEM.match(item), item
    assert all("|" not in line for line in rest)
    return match[1], match[2], items, rest


def scan_output(scan) -> tuple[str, int]:
    findings = evaluate(scan)
    code = exit_code(findings, Severity.ERROR)
    return render_scan_nagios(scan, findings, code), code


def test_a_clean_machine_is_ok_with_its_numbers():
    state, summary, items, rest = parse(scan_output(b.scan(gpus=[b.gpu(0), b.gpu(1)]))[0])
    assert state == "OK"
    assert summary == "no findings at or above warning on node1, 2 GPUs"
    assert "'gpus'=2;;;0" in items and "'critical'=0;;;0" in items
    assert f"'gpu1_memory_used'={300 * b.MIB}B;;;0;{80 * b.GIB}" in items
    assert rest == []


def test_the_state_follows_the_exit_code_and_names_the_worst_findings():
    output, code = scan_output(b.gtx1650_three_uvicorn())
    state, summary, items, rest = parse(output)
    assert (state, code) == ("WARNING", 1)
    assert summary.startswith("duplicate-backend (pid:2101)")
    assert "'warning'=1;;;0" in items
    assert any(line.startswith("WARNING duplicate-backend (pid:2101): ") for line in rest)


def test_hostile_text_cannot_split_the_output():
    scan = b.with_host(b.scan(), hostname="evil|'=\nCRITICAL")
    state, summary, _items, _rest = parse(scan_output(scan)[0])
    assert state == "OK" and "|" not in summary and "\n" not in summary


def test_long_output_is_capped():
    gpus = [b.gpu(i, temperature_c=86, temperature_slowdown_c=87) for i in range(30)]
    _state, _summary, _items, rest = parse(scan_output(b.scan(gpus=gpus))[0])
    assert len(rest) == MAX_DETAIL_LINES + 1 and rest[-1].startswith("... and ")


@pytest.mark.parametrize(("args", "kwargs", "expected"), [
    (("load1", 4.7), {}, "'load1'=4.7"),
    (("rta", 0.0125, "s"), {"warn": 1, "crit": 2, "minimum": 0}, "'rta'=0.013s;1;2;0"),
    (("mem", 3, "B"), {"minimum": 0, "maximum": 8}, "'mem'=3B;;;0;8"),
    (("a 'b'=c", 1), {}, "'a b_c'=1"),
])
def test_performance_data_follows_the_guidelines(args, kwargs, expected):
    assert perf(*args, **kwargs) == expected
    assert PERF_ITEM.match(expected)


def test_unknown_output_carries_the_reason():
    state, summary, items, rest = parse(unknown_output("gpu-audit.toml:3: unknown key 'x'"))
    assert (state, items, rest) == ("UNKNOWN", [], [])
    assert summary == "gpu-audit.toml:3: unknown key 'x'"
    assert status_line(7, "odd", []) == "GPU-AUDIT UNKNOWN - odd"
