"""The check policy as CI maintainers write it: found, read, and rejected with file:line:key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.check.policy import CheckPolicy, load_check_policy, policy_keys
from gpu_audit.errors import ConfigError

CONTRACT_KEYS = {"min_gpus", "gpu_name", "min_gpu_memory_gib", "min_free_vram_gib",
                 "min_free_vram_pct", "max_swap_used_gib", "duplicate_backends",
                 "unattributed_vram", "foreign_processes", "fail_on", "warn_on", "ignore",
                 "require_torch_cuda"}


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_contract_keys_are_all_policy_keys():
    assert set(policy_keys()) >= CONTRACT_KEYS


def test_no_configuration_file_gives_the_runner_defaults(tmp_path):
    policy = load_check_policy(search_from=tmp_path)
    assert policy == CheckPolicy()
    assert policy.min_gpus == 1 and policy.foreign_processes == "fail"
    assert policy.source is None


def test_pyproject_check_table_is_read_and_generic_keys_stay_out(tmp_path):
    write(tmp_path / "pyproject.toml", """\
[project]
name = "trainer"

[tool.gpu-audit]
max_swap_used_gib = 8

[tool.gpu-audit.check]
min_gpus = 2
gpu_name = "H100|A100"
min_free_vram_gib = 70
duplicate_backends = "warn"
ignore = ["gpu-process-gone"]
""")
    nested = tmp_path / "src" / "pkg"
    nested.mkdir(parents=True)
    policy = load_check_policy(search_from=nested)
    assert policy.min_gpus == 2
    assert policy.gpu_name == "H100|A100"
    assert policy.min_free_vram_gib == 70.0 and isinstance(policy.min_free_vram_gib, float)
    assert policy.duplicate_backends == "warn"
    assert policy.ignore == ["gpu-process-gone"]
    assert policy.max_swap_used_gib == 2.0  # the generic table's value is not the check's
    assert policy.source == str(tmp_path / "pyproject.toml")


def test_gpu_audit_toml_check_table(tmp_path):
    write(tmp_path / "gpu-audit.toml", """\
max_swap_used_gib = 4

[check]
max_swap_used_gib = 0.5
require_torch_cuda = true
stages = ["imports"]
""")
    policy = load_check_policy(search_from=tmp_path)
    assert policy.max_swap_used_gib == 0.5
    assert policy.require_torch_cuda is True
    assert policy.stages == ["imports"]


def test_policy_file_has_its_keys_at_top_level(tmp_path):
    path = write(tmp_path / "runner-policy.toml", 'min_gpus = 8\nown_processes = "fail"\n')
    write(tmp_path / "gpu-audit.toml", "[check]\nmin_gpus = 1\n")  # not searched when given
    policy = load_check_policy(path, search_from=tmp_path)
    assert policy.min_gpus == 8 and policy.own_processes == "fail"
    assert policy.source == str(path)


def test_policy_flag_pointing_at_pyproject_reads_its_check_table(tmp_path):
    path = write(tmp_path / "pyproject.toml", "[tool.gpu-audit.check]\nmin_gpus = 4\n")
    assert load_check_policy(path).min_gpus == 4


def test_unknown_key_names_file_line_and_suggests(tmp_path):
    write(tmp_path / "pyproject.toml", """\
[tool.gpu-audit]
max_swap_used_gib = 8

[tool.gpu-audit.check]
min_gpus = 1
min_free_vram_pc = 50
""")
    with pytest.raises(ConfigError) as caught:
        load_check_policy(search_from=tmp_path)
    message = str(caught.value)
    assert f"{tmp_path / 'pyproject.toml'}:6:" in message
    assert "[tool.gpu-audit.check]" in message
    assert "'min_free_vram_pc'" in message and "did you mean 'min_free_vram_pct'" in message


def test_wrong_type_points_at_the_check_table_line_not_the_generic_one(tmp_path):
    write(tmp_path / "gpu-audit.toml", """\
max_swap_used_gib = 4

[check]
max_swap_used_gib = "two"
""")
    with pytest.raises(ConfigError) as caught:
        load_check_policy(search_from=tmp_path)
    message = str(caught.value)
    assert "gpu-audit.toml:4:" in message
    assert "'max_swap_used_gib' must be a number" in message and "'two'" in message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("min_gpus = 1.5", "'min_gpus' must be an integer"),
        ("min_gpus = true", "'min_gpus' must be an integer"),
        ("require_torch_cuda = 1", "'require_torch_cuda' must be true or false"),
        ("ignore = \"swap-pressure\"", "'ignore' must be a list of strings"),
        ("ignore = [1, 2]", "'ignore' must be a list of strings"),
        ("gpu_name = 3", "'gpu_name' must be a string"),
        ("min_gpus = -1", "'min_gpus' must not be negative"),
        ("min_free_vram_pct = 150", "percentage (0-100)"),
        ("foreign_processes = \"block\"", "'fail', 'warn', 'ignore'"),
        ("fail_on = \"fatal\"", "unknown severity 'fatal'"),
        ("gpu_name = \"H100(\"", "not a valid regular expression"),
        ("min_driver_version = \"latest\"", "dotted version"),
        ("stages = [\"full\"]", "unknown stage 'full'"),
        ("warn_on = \"error\"\nfail_on = \"warning\"", "must not be above fail_on"),
        ("[nested]\nx = 1", "unknown key 'nested'"),
    ],
)
def test_bad_values_are_config_errors_naming_file_line_and_key(tmp_path, line, expected):
    path = write(tmp_path / "policy.toml", f"# runner policy\n{line}\n")
    with pytest.raises(ConfigError) as caught:
        load_check_policy(path)
    message = str(caught.value)
    assert expected in message
    assert message.startswith(f"{path}:2:") or message.startswith(f"{path}:3:"), message


def test_toml_syntax_error_names_the_file(tmp_path):
    path = write(tmp_path / "policy.toml", "min_gpus = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_check_policy(path)


def test_missing_policy_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="policy file not found"):
        load_check_policy(tmp_path / "nope.toml")


def test_ignore_names_a_typo_with_a_suggestion_when_ids_are_known(tmp_path):
    path = write(tmp_path / "policy.toml", 'ignore = ["swap-presure"]\n')
    known = {"swap-pressure", "low-free-vram", "gpu-name"}
    with pytest.raises(ConfigError, match="did you mean 'swap-pressure'"):
        load_check_policy(path, known_ids=known)
    ok = write(tmp_path / "ok.toml", 'ignore = ["swap-pressure", "gpu-name"]\n')
    assert load_check_policy(ok, known_ids=known).ignore == ["swap-pressure", "gpu-name"]


def test_quoted_keys_and_spaced_headers_still_find_the_line(tmp_path):
    path = write(tmp_path / "pyproject.toml", """\
[tool.gpu-audit]
min_gpus = 3

[ tool . "gpu-audit" . check ]
"min_gpus" = "eight"
""")
    with pytest.raises(ConfigError) as caught:
        load_check_policy(path)
    assert "pyproject.toml:5:" in str(caught.value)
