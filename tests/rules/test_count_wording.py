"""Findings count things in plain English: "1 NVIDIA GPU", "2 Xid events", never "GPU(s)"."""

from __future__ import annotations

from gpu_audit.config import Policy
from gpu_audit.rules import evaluate
from gpu_audit.rules.software import torch_cpu_only
from tests import builders as b
from tests.rules.test_software import installed


def test_one_gpu_is_one_gpu_and_two_are_gpus():
    one = installed("2.5.1+cpu", "cpu", gpus=[b.gpu(0)])
    (finding,) = torch_cpu_only(one, Policy())
    assert finding.title.endswith("on a host with 1 NVIDIA GPU")
    two = installed("2.5.1+cpu", "cpu", gpus=[b.gpu(0), b.gpu(1)])
    (finding,) = torch_cpu_only(two, Policy())
    assert finding.title.endswith("on a host with 2 NVIDIA GPUs")


def test_no_finding_says_s_in_brackets():
    scans = [installed("2.5.1+cpu", "cpu", gpus=[b.gpu(0)]),
             installed("2.5.1+cpu", "cpu", gpus=[b.gpu(0), b.gpu(1)])]
    for scan in scans:
        for finding in evaluate(scan, Policy()):
            text = " ".join((finding.title, finding.detail, finding.remedy))
            assert "(s)" not in text and "(es)" not in text, finding.id
