"""``GPU_AUDIT_<KEY>`` variables: above the files, below the flags, and named when wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.config import CheckPolicy, Policy, env_name, load_check_policy, load_policy
from gpu_audit.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_variable_names_are_the_upper_cased_keys():
    assert env_name("min_free_vram_pct") == "GPU_AUDIT_MIN_FREE_VRAM_PCT"
    assert env_name("fail_on") == "GPU_AUDIT_FAIL_ON"


def test_scan_precedence_is_environment_over_file_over_default(tmp_path):
    path = write(tmp_path / "gpu-audit.toml", "min_free_vram_pct = 30\nmax_swap_used_gib = 4\n")
    assert load_policy(path, environ={}).min_free_vram_pct == 30.0
    policy = load_policy(path, environ={"GPU_AUDIT_MIN_FREE_VRAM_PCT": "20",
                                        "GPU_AUDIT_FAIL_ON": "warning"})
    assert policy.min_free_vram_pct == 20.0 and policy.max_swap_used_gib == 4.0
    assert policy.fail_on == "warning"
    assert policy.source == f"{path} + environment (GPU_AUDIT_MIN_FREE_VRAM_PCT, GPU_AUDIT_FAIL_ON)"
    alone = load_policy(None, search=False, environ={"GPU_AUDIT_SMALL_GPU_GIB": "12"})
    assert alone.small_gpu_gib == 12.0 and alone.source == "environment (GPU_AUDIT_SMALL_GPU_GIB)"
    assert load_policy(None, search=False, environ={}) == Policy()


def test_monkeypatched_process_environment_is_read_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_AUDIT_IGNORE", "swap-pressure, low-host-memory,,")
    assert load_policy(None, search=False).ignore == ["swap-pressure", "low-host-memory"]
    monkeypatch.setenv("GPU_AUDIT_IGNORE", "")
    path = write(tmp_path / "gpu-audit.toml", 'ignore = ["low-free-vram"]\n')
    assert load_policy(path).ignore == []  # an empty list replaces the file's


def test_scan_leaves_check_keys_and_other_variables_alone():
    environ = {"GPU_AUDIT_MIN_GPUS": "not a number", "GPU_AUDIT_RUNTIME_DIR": "/run/x",
               "GPU_AUDIT_TORCH_PROBE": "1"}
    assert load_policy(None, search=False, environ=environ) == Policy()


def test_check_precedence_default_generic_table_check_table_environment(tmp_path):
    write(tmp_path / "pyproject.toml", """\
[tool.gpu-audit]
min_free_vram_pct = 20
max_swap_used_gib = 3

[tool.gpu-audit.check]
min_free_vram_pct = 30
gpu_name = "H100"
""")

    def load(**environ: str) -> CheckPolicy:
        return load_check_policy(search_from=tmp_path, environ=environ)

    assert load().min_free_vram_pct == 30.0  # check table over [tool.gpu-audit]
    assert load().max_swap_used_gib == 3.0  # [tool.gpu-audit] over the default
    assert load().min_gpus == 1  # the default
    top = load(GPU_AUDIT_MIN_FREE_VRAM_PCT="40", GPU_AUDIT_MIN_GPUS="2",
               GPU_AUDIT_GPU_NAME="", GPU_AUDIT_REQUIRE_TORCH_CUDA="yes",
               GPU_AUDIT_STAGES="imports,smoke")
    assert (top.min_free_vram_pct, top.min_gpus) == (40.0, 2)
    assert top.gpu_name is None  # an empty variable unsets a key that may be unset
    assert top.require_torch_cuda is True and top.stages == ["imports", "smoke"]
    assert "environment (GPU_AUDIT_MIN_FREE_VRAM_PCT" in top.source


def test_ignore_from_the_environment_replaces_both_tables(tmp_path):
    write(tmp_path / "gpu-audit.toml", 'ignore = ["gpu-process-gone"]\n\n[check]\n'
                                       'ignore = ["swap-pressure"]\n')
    both = load_check_policy(search_from=tmp_path, environ={})
    assert both.ignore == ["gpu-process-gone", "swap-pressure"]
    env = load_check_policy(search_from=tmp_path, environ={"GPU_AUDIT_IGNORE": "gpu-name"},
                            known_ids={"gpu-name", "swap-pressure", "gpu-process-gone"})
    assert env.ignore == ["gpu-name"]


def test_a_fail_on_from_a_higher_layer_lowers_warn_on_with_it(tmp_path):
    write(tmp_path / "gpu-audit.toml", '[check]\nwarn_on = "error"\nfail_on = "critical"\n')
    policy = load_check_policy(search_from=tmp_path, environ={"GPU_AUDIT_FAIL_ON": "warning"})
    assert (policy.fail_on, policy.warn_on) == ("warning", "warning")
    write(tmp_path / "gpu-audit.toml", '[check]\nfail_on = "warning"\n')
    with pytest.raises(ConfigError, match=r"^environment variable GPU_AUDIT_WARN_ON: warn_on "
                                          r"\('error'\) must not be above fail_on \('warning'\)"):
        load_check_policy(search_from=tmp_path, environ={"GPU_AUDIT_WARN_ON": "error"})


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("GPU_AUDIT_MIN_FREE_VRAM_PCT", "ten",
         "key 'min_free_vram_pct' must be a number, got 'ten'"),
        ("GPU_AUDIT_MIN_FREE_VRAM_PCT", "150", "is a percentage (0-100)"),
        ("GPU_AUDIT_MAX_SWAP_USED_GIB", "inf", "must be a number"),
        ("GPU_AUDIT_MAX_SWAP_USED_GIB", "-2", "must not be negative"),
        ("GPU_AUDIT_FAIL_ON", "fatal", "unknown severity 'fatal'"),
        ("GPU_AUDIT_FAIL_ON", " ", "key 'fail_on' must not be empty"),
        ("GPU_AUDIT_MIN_GPUS", "1.5", "key 'min_gpus' must be an integer"),
        ("GPU_AUDIT_REQUIRE_TORCH_CUDA", "maybe", "must be true or false"),
        ("GPU_AUDIT_DUPLICATE_BACKENDS", "kill", "must be one of 'fail', 'warn', 'ignore'"),
        ("GPU_AUDIT_GPU_NAME", "H100(", "not a valid regular expression"),
        ("GPU_AUDIT_STAGES", "imports,full", "unknown stage 'full'"),
        ("GPU_AUDIT_IGNORE", "swap-presure", "did you mean 'swap-pressure'"),
    ],
)
def test_bad_values_are_config_errors_naming_the_variable(tmp_path, name, value, expected):
    with pytest.raises(ConfigError) as caught:
        load_check_policy(search_from=tmp_path, environ={name: value},
                          known_ids={"swap-pressure", "gpu-name"})
    message = str(caught.value)
    assert message.startswith(f"environment variable {name}: "), message
    assert expected in message


def test_scan_reports_its_own_bad_variables():
    with pytest.raises(ConfigError, match="environment variable GPU_AUDIT_FAIL_ON: "):
        load_policy(None, search=False, environ={"GPU_AUDIT_FAIL_ON": "fatal"})
