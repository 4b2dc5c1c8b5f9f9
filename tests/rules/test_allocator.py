"""Allocator configuration findings, from hand-built snapshots (no I/O)."""

from __future__ import annotations

import msgspec

from gpu_audit.config import Policy
from gpu_audit.model import AllocatorConfig, Scan, Severity, TorchProbe
from gpu_audit.rules import evaluate
from gpu_audit.rules.allocator import (
    alloc_conf_advice,
    alloc_conf_conflict,
    alloc_conf_deprecated_name,
    alloc_conf_ignored,
    alloc_conf_invalid,
    alloc_conf_risky_combination,
)
from tests import builders as b

BOTH = "export PYTORCH_ALLOC_CONF='{0}' PYTORCH_CUDA_ALLOC_CONF='{0}'"


def job_env(
    cuda: str | None = None,
    new: str | None = None,
    torch: str | None = "2.13.0+cu126",
    environment: dict[str, str] | None = None,
    gpus: list | None = None,
    os: str = "Linux",
    **overrides,
) -> Scan:
    """A one-GPU Linux host (80 GiB unless ``gpus``) whose job environment carries these values."""
    alloc = AllocatorConfig(
        source="env", pytorch_cuda_alloc_conf=cuda, pytorch_alloc_conf=new, torch_version=torch,
        torch_variant="cuda" if torch else None, environment=environment or {},
    )
    scan = b.scan(gpus=gpus, allocator=alloc, **overrides)
    return b.with_host(scan, os=os)


def run(rule, scan: Scan, policy: Policy | None = None):
    return list(rule(scan, policy or Policy()))


# ----------------------------------------------------------------------------- alloc-conf-invalid


def test_invalid_string_is_an_error_with_column_and_a_repaired_export():
    scan = job_env(cuda="expandable_segments:true,max_split_size_mb:128", torch="2.5.1+cu124")
    (finding,) = run(alloc_conf_invalid, scan)
    assert finding.severity is None  # the rule's default: error
    assert "column 21" in finding.detail
    assert finding.evidence["issues"][0]["column"] == 21
    assert finding.evidence["read_by_torch"] is True
    # torch 2.5 reads only the old name, so the remedy sets only that one
    assert finding.remedy == ("export PYTORCH_CUDA_ALLOC_CONF="
                              "'expandable_segments:True,max_split_size_mb:128'")


def test_split_minimum_is_judged_for_the_installed_torch():
    assert run(alloc_conf_invalid, job_env(cuda="max_split_size_mb:20", torch="2.13.0")) == []
    (finding,) = run(alloc_conf_invalid, job_env(cuda="max_split_size_mb:20", torch="2.9.1"))
    assert "must be > 20" in finding.title
    assert "max_split_size_mb:21" in finding.remedy


def test_unknown_key_gets_did_you_mean():
    (finding,) = run(alloc_conf_invalid, job_env(new="expandable_segment:True"))
    assert "did you mean 'expandable_segments'" in finding.title
    assert finding.remedy == BOTH.format("expandable_segments:True")


def test_accepted_but_misread_string_is_a_warning():
    (finding,) = run(alloc_conf_invalid, job_env(cuda="max_split_size_mb:512MB"))
    assert finding.severity == Severity.WARNING
    assert "reads only the leading '512'" in finding.title
    assert finding.evidence["repaired"] == "max_split_size_mb:512"


def test_problems_in_a_variable_torch_does_not_read_are_only_warnings():
    # torch 2.5 never reads PYTORCH_ALLOC_CONF; its broken value matters only after an upgrade
    scan = job_env(cuda="expandable_segments:True", new="max_split_size_mb:abc", torch="2.5.1")
    (finding,) = run(alloc_conf_invalid, scan)
    assert finding.severity == Severity.WARNING
    assert finding.evidence["variable"] == "PYTORCH_ALLOC_CONF"
    assert finding.evidence["read_by_torch"] is False


def test_valid_or_absent_strings_are_quiet():
    assert run(alloc_conf_invalid, job_env()) == []
    assert run(alloc_conf_invalid, job_env(cuda="expandable_segments:True")) == []
    assert run(alloc_conf_invalid, b.scan(allocator=None)) == []


def test_torch_own_verdict_from_the_probe_is_reported_when_we_found_nothing():
    scan = job_env(cuda="expandable_segments:True")
    probe = TorchProbe(python="/usr/bin/python3", torch_version="2.13.0+cu126",
                       allocator_error="ValueError: something only torch knows")
    (finding,) = run(alloc_conf_invalid, msgspec.structs.replace(scan, torch_probe=probe))
    assert finding.severity is None
    assert finding.evidence["torch_says"] == "ValueError: something only torch knows"


def test_torch_own_verdict_joins_our_finding_when_both_agree():
    scan = job_env(cuda="max_split_size_mb:5")
    probe = TorchProbe(python="python3", torch_version="2.13.0",
                       allocator_error="ValueError: ... must be >= 20")
    (finding,) = run(alloc_conf_invalid, msgspec.structs.replace(scan, torch_probe=probe))
    assert finding.evidence["torch_says"] == "ValueError: ... must be >= 20"


# ----------------------------------------------------------------------------- alloc-conf-ignored


def test_new_name_alone_is_ignored_by_torch_2_9_and_the_fix_sets_both():
    conf = "expandable_segments:True"
    (finding,) = run(alloc_conf_ignored, job_env(new=conf, torch="2.9.1+cu128"))
    assert finding.severity is None  # warning
    assert "183387" in finding.detail
    assert finding.remedy == BOTH.format(conf)


def test_new_name_alone_is_ignored_by_torch_2_8_and_the_fix_is_the_old_name():
    (finding,) = run(alloc_conf_ignored, job_env(new="expandable_segments:True", torch="2.8.0"))
    assert finding.remedy == "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'"


def test_new_name_alone_works_from_2_10():
    assert run(alloc_conf_ignored, job_env(new="expandable_segments:True", torch="2.10.0")) == []
    assert run(alloc_conf_ignored, job_env(new="expandable_segments:True", torch="2.13.0")) == []


def test_unknown_torch_version_is_noted_as_a_possibility():
    (finding,) = run(alloc_conf_ignored, job_env(new="expandable_segments:True", torch=None))
    assert finding.severity == Severity.INFO
    assert "not installed where gpu-audit runs" in finding.detail


def test_empty_old_name_hides_the_new_one_from_2_12():
    scan = job_env(cuda="", new="expandable_segments:True", torch="2.13.0")
    (finding,) = run(alloc_conf_ignored, scan)
    assert "empty PYTORCH_CUDA_ALLOC_CONF" in finding.title


def test_no_cuda_memory_caching_makes_every_setting_moot_and_is_reported_once():
    scan = job_env(cuda="expandable_segments:True",
                   environment={"PYTORCH_NO_CUDA_MEMORY_CACHING": "0"})
    assert run(alloc_conf_ignored, scan) == []
    (finding,) = [f for f in evaluate(scan) if "PYTORCH_NO_CUDA_MEMORY_CACHING" in f.remedy]
    assert finding.id == "caching-allocator-disabled"
    assert "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' is never used" in finding.detail
    assert finding.evidence["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_expandable_segments_are_ignored_on_windows():
    scan = job_env(cuda="expandable_segments:True,max_split_size_mb:256", os="Windows")
    (finding,) = run(alloc_conf_ignored, scan)
    assert "Windows" in finding.title
    assert "max_split_size_mb:256" in finding.remedy
    assert "expandable" not in finding.remedy
    assert run(alloc_conf_ignored, job_env(cuda="expandable_segments:True")) == []


def test_cuda_only_keys_in_the_new_name_are_ignored_by_2_10_while_old_name_is_set():
    scan = job_env(cuda="max_split_size_mb:128", new="backend:cudaMallocAsync", torch="2.10.1")
    (finding,) = run(alloc_conf_ignored, scan)
    assert finding.evidence["ignored_keys"] == ["backend"]


# --------------------------------------------------------------------- alloc-conf-deprecated-name


def test_old_name_alone_on_2_9_and_2_10_warns_but_the_fix_keeps_it():
    for torch in ("2.9.0", "2.10.0"):
        (finding,) = run(alloc_conf_deprecated_name,
                         job_env(cuda="expandable_segments:True", torch=torch))
        assert finding.severity is None  # info
        assert finding.remedy == BOTH.format("expandable_segments:True")


def test_no_deprecation_finding_where_torch_prints_no_warning():
    for torch in ("2.8.0", "2.11.0", "2.12.0", "2.13.0", None):  # 2.11.0: seen on a GPU
        assert run(alloc_conf_deprecated_name,
                   job_env(cuda="expandable_segments:True", torch=torch)) == []
    both = job_env(cuda="expandable_segments:True", new="expandable_segments:True",
                   torch="2.9.1")
    assert run(alloc_conf_deprecated_name, both) == []


# ----------------------------------------------------------------------------- alloc-conf-conflict


def test_conflict_names_the_winner_for_each_era():
    cuda, new = "max_split_size_mb:128", "expandable_segments:True"
    (old,) = run(alloc_conf_conflict, job_env(cuda=cuda, new=new, torch="2.9.1"))
    assert old.evidence["winner"] == "PYTORCH_CUDA_ALLOC_CONF"
    assert old.remedy == BOTH.format(cuda)
    (mid,) = run(alloc_conf_conflict, job_env(cuda=cuda, new=new, torch="2.10.0"))
    assert mid.evidence["effective"] == "expandable_segments:True"
    (new_era,) = run(alloc_conf_conflict, job_env(cuda=cuda, new=new, torch="2.13.0"))
    assert new_era.evidence["winner"] == "PYTORCH_CUDA_ALLOC_CONF"
    (unknown,) = run(alloc_conf_conflict, job_env(cuda=cuda, new=new, torch=None))
    assert unknown.evidence["effective"] is None


def test_same_string_in_both_names_is_no_conflict_even_with_other_spacing():
    scan = job_env(cuda="expandable_segments:True", new=" expandable_segments : True ")
    assert run(alloc_conf_conflict, scan) == []
    assert run(alloc_conf_conflict, job_env(cuda="expandable_segments:True")) == []


# -------------------------------------------------------------------- alloc-conf-risky-combination


def titles(findings) -> list[str]:
    return [f.title for f in findings]


def test_expandable_with_max_split_suggests_dropping_the_limit():
    scan = job_env(cuda="expandable_segments:True,max_split_size_mb:512")
    (finding,) = run(alloc_conf_risky_combination, scan)
    assert finding.title == "expandable_segments with max_split_size_mb"
    assert finding.remedy == BOTH.format("expandable_segments:True")


def test_gc_threshold_without_fraction_does_nothing():
    scan = job_env(cuda="garbage_collection_threshold:0.7")
    (finding,) = run(alloc_conf_risky_combination, scan)
    assert "without a memory fraction" in finding.title
    assert finding.remedy == "unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF"
    with_fraction = job_env(cuda="garbage_collection_threshold:0.7,per_process_memory_fraction:0.9")
    assert run(alloc_conf_risky_combination, with_fraction) == []


def test_the_field_note_string_trips_two_combinations():
    # "max_split_size_mb:512,garbage_collection_threshold:0.7,expandable_segments:True"
    scan = job_env(new="max_split_size_mb:512,garbage_collection_threshold:0.7,"
                       "expandable_segments:True", torch="2.10.0")
    assert sorted(titles(run(alloc_conf_risky_combination, scan))) == [
        "expandable_segments with max_split_size_mb",
        "garbage_collection_threshold has nothing to collect with expandable segments",
    ]


def test_cuda_malloc_async_ignores_native_options():
    scan = job_env(cuda="backend:cudaMallocAsync,max_split_size_mb:256,"
                        "pinned_use_cuda_host_register:True")
    (finding,) = run(alloc_conf_risky_combination, scan)
    assert finding.evidence["ignored_keys"] == ["max_split_size_mb"]
    assert finding.remedy == BOTH.format(
        "backend:cudaMallocAsync,pinned_use_cuda_host_register:True")


def test_sensible_strings_have_no_risky_combination():
    for conf in ("expandable_segments:True", "max_split_size_mb:256", "backend:cudaMallocAsync"):
        assert run(alloc_conf_risky_combination, job_env(cuda=conf)) == []


def test_ignored_variable_is_not_judged_for_combinations():
    # torch 2.8 never reads PYTORCH_ALLOC_CONF: its contents cannot conflict with anything
    scan = job_env(new="expandable_segments:True,max_split_size_mb:512", torch="2.8.0")
    assert run(alloc_conf_risky_combination, scan) == []


# ------------------------------------------------------------------------------ alloc-conf-advice


def test_small_gpu_gets_expandable_segments_advice_with_the_string_to_paste():
    scan = b.gtx1650_three_uvicorn()
    scan = msgspec.structs.replace(scan, allocator=AllocatorConfig(
        source="env", pytorch_cuda_alloc_conf="max_split_size_mb:64", pytorch_alloc_conf=None,
        torch_version="2.5.1+cu124"))
    (finding,) = run(alloc_conf_advice, scan)
    assert finding.severity is None  # info
    assert finding.evidence["small_gpus"] == [0]
    assert finding.remedy == "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'"


def test_max_split_without_expandable_on_a_big_gpu_gets_advice():
    (finding,) = run(alloc_conf_advice, job_env(cuda="max_split_size_mb:128"))
    assert "last resort" in finding.detail


def test_no_advice_when_already_expandable_or_nothing_calls_for_it():
    assert run(alloc_conf_advice, job_env()) == []  # 80 GiB GPU, nothing set
    small = [b.gpu(0, total=4 * b.GIB)]
    assert run(alloc_conf_advice, job_env(cuda="expandable_segments:True", gpus=small)) == []
    assert run(alloc_conf_advice, job_env(gpus=small, os="Windows")) == []
    assert run(alloc_conf_advice, job_env(gpus=small, torch="2.0.1")) == []
    assert run(alloc_conf_advice, job_env(cuda="backend:cudaMallocAsync", gpus=small)) == []


def test_small_gpu_threshold_comes_from_the_policy():
    scan = job_env(gpus=[b.gpu(0, total=12 * b.GIB)])
    assert run(alloc_conf_advice, scan) == []
    (finding,) = run(alloc_conf_advice, scan, Policy(small_gpu_gib=16))
    assert finding.evidence["small_gpu_gib"] == 16
