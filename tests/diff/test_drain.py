"""Which findings drain a node, and the one reason line a drain script reads."""

from __future__ import annotations

import re

from gpu_audit.diff.drain import NODE_PROBLEMS, REASON_LIMIT, drain_reason, node_problems
from gpu_audit.diff.rules import all_diff_rules
from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Finding, Severity
from gpu_audit.rules import all_rules


def finding(fid: str, severity: Severity, subject: str = "gpu:1", **evidence) -> Finding:
    return Finding(subject=subject, title=fid, detail="", remedy="", evidence=evidence, id=fid,
                   severity=severity)


def test_every_node_problem_id_is_a_registered_finding():
    assert not NODE_PROBLEMS - set(all_rules()) - set(all_diff_rules())


def test_node_problems_are_the_catalogues_declaration():
    assert {i for i, spec in catalogue.CATALOGUE.items() if spec.node_problem} == NODE_PROBLEMS
    assert {"gpu-lost", "job-vram-leak", "ecc-uncorrectable"} <= NODE_PROBLEMS
    # The workload's own findings are never the node's.
    assert not {"duplicate-backend", "alloc-conf-invalid", "torch-cpu-only"} & NODE_PROBLEMS


def test_only_node_problems_at_error_or_above_drain():
    found = [
        finding("torch-cpu-only", Severity.ERROR, "host"),  # the job's software
        finding("visible-devices-missing", Severity.ERROR, "env"),  # the job's environment
        finding("low-free-vram", Severity.WARNING),
        finding("nvml-unavailable", Severity.WARNING, "host"),  # a node without NVIDIA GPUs
        finding("remapped-rows-increased", Severity.WARNING),  # correctable rows: routine
        finding("xid-new", Severity.ERROR, xid=13, machine_fault=False),  # the program's Xid
        finding("ecc-uncorrectable", Severity.CRITICAL, uncorrected_volatile=2),
        finding("job-vram-leak", Severity.ERROR, "pid:7", pid=7, user="alice", gpu_index=0,
                used_memory_mib=8192),
    ]
    assert [f.id for f in node_problems(found)] == ["ecc-uncorrectable", "job-vram-leak"]


def test_reason_line_names_id_gpu_and_numbers():
    leak = finding("job-vram-leak", Severity.ERROR, "pid:7", pid=7, user="alice", gpu_index=0,
                   used_memory_mib=8192, status="zombie", name="python")
    assert drain_reason([leak]) == \
        "gpu-audit: job-vram-leak on gpu:0: pid=7 user=alice used_memory_mib=8192"
    ecc = finding("ecc-uncorrectable", Severity.CRITICAL, uncorrected_volatile=2,
                  uncorrected_aggregate=2)
    assert drain_reason([ecc, leak]) == ("gpu-audit: ecc-uncorrectable on gpu:1: "
                                         "uncorrected_volatile=2 uncorrected_aggregate=2 "
                                         "(+1 more)")
    xids = finding("xid-events", Severity.CRITICAL, "gpu:3", pci_bus_id="0000:3b:00",
                   counts={"79": 2}, last_message="fallen off")
    assert drain_reason([xids]) == "gpu-audit: xid-events on gpu:3: counts_79=2"


def test_reason_line_is_short_and_safe_for_a_shell_and_scontrol():
    hostile = finding("job-vram-leak", Severity.ERROR, "pid:7", pid=7, gpu_index=0,
                      user="x'; rm -rf / #\n\x1b[2J" + "y" * 300,
                      **{f"n{i}": 10**30 for i in range(20)})
    line = drain_reason([hostile] * 3)
    assert len(line) <= REASON_LIMIT
    assert re.fullmatch(r"[A-Za-z0-9._@:/+= ()-]+", line), line
    assert line.endswith("(+2 more)")
    secret = finding("job-vram-leak", Severity.ERROR, "pid:7", pid=7, gpu_index=0,
                     user="ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert "abcdefghijklmnop" not in drain_reason([secret])


def test_a_long_reason_loses_whole_numbers_never_part_of_one():
    big = finding("ecc-uncorrectable", Severity.CRITICAL, "gpu:1",
                  **{f"counter_number_{i}": 123456789012345678 for i in range(4)})
    line = drain_reason([big] * 2, report="/var/spool/gpu-audit/" + "d" * 60 + "/epilog-7.json")
    assert len(line) <= REASON_LIMIT
    assert line.endswith("... (+1 more); see /var/spool/gpu-audit/" + "d" * 60 + "/epilog-7.json")
    numbers = re.findall(r"=(\d+)", line)
    assert numbers and all(n == "123456789012345678" for n in numbers)


def test_see_report_only_with_a_report_and_its_path():
    lost = finding("gpu-lost", Severity.CRITICAL, "gpu:0")
    assert drain_reason([lost]) == "gpu-audit: gpu-lost on gpu:0"
    leak = finding("job-vram-leak", Severity.ERROR, "pid:7", pid=7, gpu_index=0)
    assert drain_reason([leak], report="/var/spool/gpu-audit/epilog-9.json") == \
        "gpu-audit: job-vram-leak on gpu:0: pid=7; see /var/spool/gpu-audit/epilog-9.json"
