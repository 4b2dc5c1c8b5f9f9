"""The stage plan as DESIGN words it, and every bad value refused before a worker starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.config import Policy, read_validate_config
from gpu_audit.errors import ConfigError, UsageError
from gpu_audit.validate.allocconf import compare_settings, parse_alloc_conf
from gpu_audit.validate.plan import (
    DEFAULT_WORKLOAD,
    ValidateOptions,
    build_plan,
    checkpoint_interval,
    plan_stages,
)


def stages(plan) -> list[tuple[str, int, str]]:
    return [(s.name, s.cycles, s.quantum) for s in plan.stages]


def plan_for(env: dict[str, str] | None = None, **options) -> object:
    return build_plan(ValidateOptions(**options), Policy(), environ=env or {})


def test_plain_validate_runs_every_stage_with_500_full_quantum_cycles() -> None:
    assert stages(plan_for()) == [("imports", 0, "off"), ("smoke", 3, "lite"),
                                  ("classical", 50, "off"), ("quantum-lite", 50, "lite"),
                                  ("full", 500, "full")]


def test_disable_quantum_with_50_cycles_is_imports_smoke_then_one_classical_stage() -> None:
    plan = plan_for(disable_quantum=True, cycles=50)
    assert stages(plan) == [("imports", 0, "off"), ("smoke", 3, "off"),
                            ("classical", 50, "off")]
    assert any("repeat stage classical" in note for note in plan.notes)


def test_disable_quantum_keeps_a_classical_full_stage_when_it_is_longer() -> None:
    assert stages(plan_for(disable_quantum=True)) == [
        ("imports", 0, "off"), ("smoke", 3, "off"), ("classical", 50, "off"),
        ("full", 500, "off")]


def test_quantum_lite_makes_the_final_stage_lite() -> None:
    assert stages(plan_for(quantum_lite=True, cycles=200))[-1] == ("full", 200, "lite")


def test_earlier_stages_never_run_longer_than_the_final_one() -> None:
    assert stages(plan_for(cycles=10)) == [("imports", 0, "off"), ("smoke", 3, "lite"),
                                           ("classical", 10, "off"),
                                           ("quantum-lite", 10, "lite"), ("full", 10, "full")]


def test_stage_selection_keeps_plan_order_and_accepts_commas() -> None:
    selected = plan_stages(500, disable_quantum=False, quantum_lite=False,
                           selected=["full,smoke", "imports"])
    assert [s.name for s in selected] == ["imports", "smoke", "full"]


@pytest.mark.parametrize(("options", "message"), [
    ({"stages": ["warmup"]}, "unknown stage"),
    ({"stages": ["quantum-lite"], "disable_quantum": True}, "contradict"),
    ({"cycles": 0}, "^--cycles 0: must lie between 1 and"),
    ({"hang_min_s": 0.0}, "^--hang-min 0.0: must be above 0 and at most"),
    ({"seed": 2**64}, "^--seed 18446744073709551616: must lie between"),
    ({"max_retries": -1}, "between 0 and 20"),
    ({"device": "gpu0"}, "expected auto, cpu, cuda or cuda:N"),
    ({"emulate_memory": "four gigs"}, "not a size"),
    ({"checkpoint_every": "0"}, r"\(0, 100\]"),
    ({"checkpoint_every": "ten"}, "percentage"),
    ({"max_split_size_mb": "10"}, "below the minimum"),
    ({"max_split_size_mb": "128,abc"}, "whole MiB"),
    ({"max_split_size_mb": "128,128"}, "twice"),
    ({"alloc_conf": "expandable_segments:true"}, "exactly True or False"),
    ({"alloc_conf": "max_split_size:128"}, "unknown allocator option"),
    ({"alloc_conf": "max_split_size_mb:64", "max_split_size_mb": "128"}, "contradict"),
    ({"alloc_conf": "garbage_collection_threshold:1.5"}, "strictly between 0 and 1"),
    ({"requires": ["phi bigger than 0.3"]}, "expected METRIC OP NUMBER"),
    ({"requires": ["avg(phi)>1"]}, "unknown aggregate"),
    ({"workload": "not a module"}, "package.module:Attr"),
    ({"workload": "missing_file.py:Workload"}, "no such file"),
    ({"disable_quantum": True, "quantum_lite": True}, "contradict"),
    ({"hang_min_s": 10, "hang_max_s": 5}, "--hang-max"),
])
def test_bad_values_are_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan_for(**options)


def test_max_split_minimum_follows_the_installed_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_audit.validate import plan as plan_module

    monkeypatch.setattr(plan_module, "installed_torch_version", lambda: "2.13.0+cpu")
    assert plan_for(max_split_size_mb="20").variants[0].alloc_conf == "max_split_size_mb:20"
    monkeypatch.setattr(plan_module, "installed_torch_version", lambda: "2.9.1+cu128")
    with pytest.raises(UsageError, match="use 21 or more"):
        plan_for(max_split_size_mb="20")


def test_a_comma_list_of_max_split_values_makes_one_variant_each() -> None:
    plan = plan_for(max_split_size_mb="none,128,512", alloc_conf="expandable_segments:False")
    assert [(v.label, v.alloc_conf) for v in plan.variants] == [
        ("max-split-none", "expandable_segments:False"),
        ("max-split-128", "expandable_segments:False,max_split_size_mb:128"),
        ("max-split-512", "expandable_segments:False,max_split_size_mb:512"),
    ]
    assert plan.variants[1].expected_settings == {"max_split_size": 128 * 1024**2,
                                                  "expandable_segments": False}
    assert len(plan.leg_keys()) == 3 * 5


def test_environment_settings_are_used_when_no_flag_is_given() -> None:
    plan = plan_for(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert plan.variants[0].alloc_conf == "expandable_segments:True"
    assert any("taken from PYTORCH_CUDA_ALLOC_CONF" in note for note in plan.notes)


def test_two_different_environment_settings_are_refused() -> None:
    with pytest.raises(UsageError, match="both set and differ"):
        plan_for(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                      "PYTORCH_ALLOC_CONF": "max_split_size_mb:128"})


def test_gc_threshold_without_a_memory_fraction_is_a_warning_not_an_error() -> None:
    plan = plan_for(alloc_conf="garbage_collection_threshold:0.6")
    assert any("no effect unless a per-process memory fraction" in w for w in plan.warnings)
    capped = plan_for(alloc_conf="garbage_collection_threshold:0.6", emulate_memory="4GiB")
    assert capped.emulate_memory_bytes == 4 * 1024**3
    assert not any("memory fraction" in w for w in capped.warnings)


def test_defaults_come_from_the_policy_and_the_reference_workload() -> None:
    plan = build_plan(ValidateOptions(), Policy(alloc_fragmentation_pct=30, max_swap_used_gib=1),
                      environ={})
    assert plan.workload == DEFAULT_WORKLOAD
    assert plan.max_fragmentation_pct == 30
    assert plan.max_swap_used_bytes == 1024**3
    assert plan.device == "auto"


def test_a_workload_file_is_resolved_to_an_absolute_path(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text("class W:\n    def cycle(self, ctx):\n        return {}\n")
    plan = build_plan(ValidateOptions(workload="loop.py:W"), environ={}, cwd=tmp_path)
    assert plan.workload == f"{tmp_path.resolve() / 'loop.py'}:W"


def test_checkpoints_every_ten_percent_and_at_least_every_cycle() -> None:
    assert checkpoint_interval(500, 10) == 50
    assert checkpoint_interval(3, 10) == 1
    assert checkpoint_interval(55, 10) == 6


def test_pyproject_validate_table_is_read_and_typos_named(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.gpu-audit.validate]\nworkload = "mypkg.loop:Loop"\n'
                         'require = ["phi>0.3"]\nmax_split_size_mb = [128, 256]\ncycles = 40\n')
    values = read_validate_config(pyproject)
    assert values["workload"] == "mypkg.loop:Loop"
    assert values["requires"] == ["phi>0.3"]
    assert values["max_split_size_mb"] == "128,256"
    assert values["config_dir"] == str(tmp_path.resolve())
    pyproject.write_text('[tool.gpu-audit.validate]\nworkload = "a.b:C"\ncylces = 40\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml:3: unknown key 'cylces'.*'cycles'"):
        read_validate_config(pyproject)
    pyproject.write_text('[tool.gpu-audit.validate]\ncycles = "many"\n')
    with pytest.raises(ConfigError, match="must be an integer"):
        read_validate_config(pyproject)


def test_requested_and_reported_allocator_settings_are_compared() -> None:
    conf = parse_alloc_conf("max_split_size_mb:128,expandable_segments:False",
                            torch_version="2.13.0")
    expected = conf.expected_settings()
    assert compare_settings(expected, {"max_split_size": 128 * 1024**2,
                                       "expandable_segments": False}) == []
    problems = compare_settings(expected, {"max_split_size": -1, "expandable_segments": False})
    assert problems == [f"max_split_size: asked {128 * 1024**2}, allocator reports -1"]
    assert compare_settings(expected, None) == []
