"""allocator-fragmentation and allocator-oom-retries, from what a process published."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest

from gpu_audit.config import Policy
from gpu_audit.knowledge.memory import fragmentation
from gpu_audit.model import AllocatorSample, ProcessAllocatorState, Severity
from gpu_audit.rules import all_rules, evaluate
from gpu_audit.rules.allocator_live import allocator_fragmentation, allocator_oom_retries
from tests import builders as b

GIB = b.GIB
MIB = b.MIB


def state(*, allocated: int = 45 * GIB, reserved: int = 70 * GIB, split: int | None = 20 * GIB,
          torch: str = "2.5.1+cu124", settings: str = "", expandable: bool | None = False,
          backend: str = "native", history: list[AllocatorSample] | None = None,
          **extra) -> ProcessAllocatorState:
    frag = fragmentation(allocated, reserved, split)
    return ProcessAllocatorState(
        cuda_device=0, published_at="2026-11-22T10:00:00.000Z", age_s=2.0, interval_s=5.0,
        torch_version=torch, backend=backend, settings=settings, expandable_segments=expandable,
        allocated_bytes=allocated, reserved_bytes=reserved, inactive_split_bytes=split,
        reserved_unallocated_bytes=frag["reserved_unallocated_bytes"],
        fragmentation_pct=frag["fragmentation_pct"],
        split_fragmentation_pct=frag["split_fragmentation_pct"],
        history=history or [], **extra,
    )


def h100_job(allocator: ProcessAllocatorState):
    trainer = b.process(4242, 72 * 1024, ["python", "train.py"], allocator=allocator)
    return b.scan(gpus=[b.gpu(0, used=73 * GIB)], processes=[trainer])


def fragmented(**kwargs):
    """A 70 GiB reservation with 20 GiB allocated: 71.4% fragmented, 40 GiB of it trapped."""
    return state(**({"allocated": 20 * GIB, "reserved": 70 * GIB, "split": 40 * GIB} | kwargs))


def test_a_job_with_trapped_memory_gets_a_warning_with_numbers():
    (finding,) = allocator_fragmentation(h100_job(fragmented()), Policy())
    assert finding.subject == "pid:4242"
    assert finding.severity is None  # the registry's default: warning
    assert "71.4% of reserved memory is fragmented" in finding.title
    assert "50.0 GiB (71.4%) is reserved but unallocated" in finding.detail
    assert "40.0 GiB of it is trapped in split segments" in finding.detail
    assert finding.evidence["reserved_unallocated_bytes"] == 50 * GIB
    assert finding.evidence["nvml_used_memory_bytes"] == 72 * 1024 * MIB
    assert finding.evidence["threshold_pct"] == 50.0


@pytest.mark.parametrize(
    ("torch", "settings", "remedy"),
    [
        ("2.5.1+cu124", "", "`export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'`"),
        ("2.8.0", "max_split_size_mb:512",
         "`export PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:512,expandable_segments:True'`"),
        ("2.9.1+cu128", "", "`export PYTORCH_ALLOC_CONF='expandable_segments:True' "
                            "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'`"),
        ("2.11.0", "garbage_collection_threshold:0.8",
         "PYTORCH_ALLOC_CONF='garbage_collection_threshold:0.8,expandable_segments:True' "
         "PYTORCH_CUDA_ALLOC_CONF='garbage_collection_threshold:0.8,expandable_segments:True'"),
        ("2.0.1+cu118", "",
         "`export PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128'`: torch < 2.1"),
        (None, "", "`export PYTORCH_ALLOC_CONF='expandable_segments:True' "
                   "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'`"),
    ],
)
def test_the_remedy_fits_the_torch_release_and_keeps_existing_settings(torch, settings, remedy):
    (finding,) = allocator_fragmentation(h100_job(fragmented(torch=torch, settings=settings)),
                                         Policy())
    assert remedy in finding.remedy


def test_with_expandable_segments_on_the_remedy_is_different():
    job = h100_job(fragmented(split=0, expandable=True, settings="expandable_segments:True"))
    (finding,) = allocator_fragmentation(job, Policy())
    assert "despite expandable segments" in finding.title
    assert "expandable_segments:True" not in finding.remedy
    assert "torch.cuda.empty_cache()" in finding.remedy
    assert "snapshot_on_oom=True" in finding.remedy


def test_mostly_releasable_cache_is_only_informational():
    (finding,) = allocator_fragmentation(h100_job(fragmented(split=2 * GIB)), Policy())
    assert finding.severity is Severity.INFO
    assert "held but unused" in finding.title
    assert "empty_cache" in finding.remedy


@pytest.mark.parametrize(
    "allocator",
    [
        state(allocated=45 * GIB, reserved=70 * GIB),  # 35.7%: under the default 50%
        state(allocated=100 * MIB, reserved=300 * MIB, split=150 * MIB),  # 66.7%, only 200 MiB
        state(allocated=0, reserved=0, split=0),  # nothing reserved yet
        fragmented(backend="cudaMallocAsync"),  # its stats do not describe fragmentation
    ],
)
def test_no_finding_below_the_thresholds(allocator):
    assert list(allocator_fragmentation(h100_job(allocator), Policy())) == []


def test_the_threshold_comes_from_the_policy():
    job = h100_job(state(allocated=45 * GIB, reserved=70 * GIB))
    assert list(allocator_fragmentation(job, Policy(alloc_fragmentation_pct=30))) != []
    assert list(allocator_fragmentation(h100_job(fragmented()),
                                        Policy(alloc_fragmentation_pct=80))) == []


def test_processes_that_do_not_publish_are_left_alone():
    scan = b.gtx1650_three_uvicorn()
    assert list(allocator_fragmentation(scan, Policy())) == []
    assert list(allocator_oom_retries(scan, Policy())) == []


def samples(*points: tuple[int, int, int | None]) -> list[AllocatorSample]:
    return [AllocatorSample(at=f"2026-11-22T10:00:{5 * i:02d}.000Z", num_alloc_retries=r,
                            num_ooms=o, step=s) for i, (r, o, s) in enumerate(points)]


def test_climbing_retries_are_a_warning():
    history = samples((10, 0, 1000), (12, 0, 1010), (17, 0, 1020))
    (finding,) = allocator_oom_retries(h100_job(state(history=history)), Policy())
    assert finding.severity is None  # warning
    assert "7 allocation retries over 10 s (20 steps)" in finding.title
    assert finding.evidence["new_alloc_retries"] == 7
    assert finding.evidence["window_s"] == 10.0
    assert "expandable_segments:True" in finding.remedy
    assert finding.remedy.startswith("Lower the batch size")


def test_retries_with_ooms_are_an_error():
    history = samples((0, 0, None), (3, 1, None))
    (finding,) = allocator_oom_retries(h100_job(state(history=history)), Policy())
    assert finding.severity is Severity.ERROR
    assert "1 out-of-memory error was raised" in finding.detail


@pytest.mark.parametrize(
    "history",
    [
        samples((5, 0, 1), (5, 0, 2), (5, 0, 3)),  # retried long ago, steady since
        samples((9, 0, None)),  # a single sample shows no trend
        samples((9, 0, None), (0, 0, None)),  # reset_accumulated_memory_stats() zeroed it
        samples((None, None, None), (None, None, None)),  # a torch without the counter
    ],
)
def test_no_retry_finding_without_a_rise(history):
    assert list(allocator_oom_retries(h100_job(state(history=history)), Policy())) == []


def test_expandable_segments_already_on_are_not_suggested_again():
    history = samples((0, 0, None), (1, 0, None))
    job = h100_job(state(history=history, expandable=True, settings="expandable_segments:True"))
    (finding,) = allocator_oom_retries(job, Policy())
    assert "expandable_segments" not in finding.remedy


def test_both_rules_are_registered_and_documented():
    rules = all_rules()
    for rule_id in ("allocator-fragmentation", "allocator-oom-retries"):
        assert rules[rule_id].severity is Severity.WARNING
        assert rules[rule_id].summary
    findings = evaluate(h100_job(fragmented(history=samples((0, 0, None), (2, 0, None)))))
    assert {"allocator-fragmentation", "allocator-oom-retries"} <= {f.id for f in findings}


def _pasted_command(remedy: str) -> str:
    (command,) = re.findall(r"`([^`]*)`", remedy)
    return command


LIST_SETTING = "roundup_power2_divisions:[256:1,>:4]"


@pytest.mark.parametrize("torch", ["2.5.1+cu124", "2.9.1+cu128", "2.13.0", None])
def test_the_pasted_line_gives_the_whole_setting_to_the_shell(torch, tmp_path):
    """A ``>`` in the settings must not become a redirect when the remedy is pasted."""
    expected = f"{LIST_SETTING},expandable_segments:True"
    history = samples((0, 0, None), (2, 0, None))
    job = h100_job(fragmented(torch=torch, settings=LIST_SETTING, history=history))
    findings = [*allocator_fragmentation(job, Policy()), *allocator_oom_retries(job, Policy())]
    assert len(findings) == 2
    for finding in findings:
        command = _pasted_command(finding.remedy)
        words = shlex.split(command)
        assert words[0] == "export"
        assigned = dict(word.split("=", 1) for word in words[1:])
        assert "PYTORCH_CUDA_ALLOC_CONF" in assigned
        assert set(assigned.values()) == {expected}
        if shutil.which("bash") is None:
            continue
        shown = subprocess.run(
            ["bash", "-c", f'{command}; echo "$PYTORCH_CUDA_ALLOC_CONF"'], cwd=tmp_path,
            capture_output=True, text=True, check=True, env={"PATH": os.environ.get("PATH", "")})
        assert shown.stdout.splitlines() == [expected]
        assert list(tmp_path.iterdir()) == []  # no redirect wrote a file


@pytest.mark.parametrize("torch", ["2.0.1+cu118", "1.13.1", "2.5.1", "2.9.1+cu128", None])
def test_scan_and_explain_advise_the_same_setting_against_fragmentation(torch):
    from gpu_audit.knowledge.allocator import fragmentation_remedy, fragmentation_setting

    key, value = fragmentation_setting(torch)
    (finding,) = allocator_fragmentation(h100_job(fragmented(torch=torch, settings="")),
                                         Policy())
    assert f"{key}:{value}" in finding.remedy
    assert f"{key}:{value}" in fragmentation_remedy(torch)
