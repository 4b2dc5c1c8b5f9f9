"""The check table as CI maintainers write it: found, read on top of ``[tool.gpu-audit]``, and
rejected with file:line:key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.config import (
    CheckPolicy,
    Policy,
    check_keys,
    load_check_policy,
    load_policy,
    policy_keys,
)
from gpu_audit.errors import ConfigError

CONTRACT_KEYS = {"min_gpus", "gpu_name", "min_gpu_memory_gib", "min_free_vram_gib",
                 "min_free_vram_pct", "max_swap_used_gib", "duplicate_backends",
                 "unattributed_vram", "foreign_processes", "fail_on", "warn_on", "ignore",
                 "require_torch_cuda"}


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def load(path: Path | None = None, **kwargs) -> CheckPolicy:
    """The check policy with no ``GPU_AUDIT_*`` variables in the way, searched for from the
    policy file's folder rather than from wherever the tests run."""
    if path is not None:
        kwargs.setdefault("search_from", Path(path).parent)
    return load_check_policy(path, environ={}, **kwargs)


def test_contract_keys_are_all_policy_keys():
    assert set(policy_keys()) | set(check_keys()) >= CONTRACT_KEYS


def test_each_key_is_defined_once_with_one_default():
    assert not set(policy_keys()) & set(check_keys())
    assert isinstance(CheckPolicy(), Policy)
    for key in policy_keys():
        assert getattr(CheckPolicy(), key) == getattr(Policy(), key), key
    assert CheckPolicy().min_free_vram_pct == 10.0


def test_no_configuration_file_gives_the_runner_defaults(tmp_path):
    policy = load(search_from=tmp_path)
    assert policy == CheckPolicy()
    assert policy.min_gpus == 1 and policy.foreign_processes == "fail"
    assert policy.source is None


def test_pyproject_check_table_is_read_on_top_of_the_generic_table(tmp_path):
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
    policy = load(search_from=nested)
    assert policy.min_gpus == 2
    assert policy.gpu_name == "H100|A100"
    assert policy.min_free_vram_gib == 70.0 and isinstance(policy.min_free_vram_gib, float)
    assert policy.duplicate_backends == "warn"
    assert policy.ignore == ["gpu-process-gone"]
    assert policy.max_swap_used_gib == 8.0  # one policy: [tool.gpu-audit] reaches check
    assert policy.source == str(tmp_path / "pyproject.toml")


def test_gpu_audit_toml_check_table(tmp_path):
    write(tmp_path / "gpu-audit.toml", """\
max_swap_used_gib = 4

[check]
max_swap_used_gib = 0.5
require_torch_cuda = true
stages = ["imports"]
""")
    policy = load(search_from=tmp_path)
    assert policy.max_swap_used_gib == 0.5  # the check table overrides, for check alone
    assert policy.require_torch_cuda is True
    assert policy.stages == ["imports"]
    assert load_policy(tmp_path / "gpu-audit.toml", environ={}).max_swap_used_gib == 4.0


def test_check_table_ignore_adds_to_the_generic_ignore(tmp_path):
    write(tmp_path / "pyproject.toml", """\
[tool.gpu-audit]
ignore = ["gpu-process-gone"]
min_free_vram_pct = 25

[tool.gpu-audit.check]
ignore = ["swap-pressure", "gpu-process-gone"]
""")
    policy = load(search_from=tmp_path)
    assert policy.ignore == ["gpu-process-gone", "swap-pressure"]
    assert policy.min_free_vram_pct == 25.0


def test_a_check_key_in_the_generic_table_says_where_it_belongs(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.gpu-audit]\nmin_gpus = 2\n")
    with pytest.raises(ConfigError) as caught:
        load(search_from=tmp_path)
    assert "pyproject.toml:2: key 'min_gpus' is read by `gpu-audit check` only: set it in " \
        "[tool.gpu-audit.check]" in str(caught.value)
    with pytest.raises(ConfigError, match=r"set it in \[check\]"):
        load_policy(write(tmp_path / "gpu-audit.toml", "min_gpus = 2\n"), environ={})


def test_policy_file_has_its_keys_at_top_level(tmp_path):
    path = write(tmp_path / "runner-policy.toml", 'min_gpus = 8\nown_processes = "fail"\n')
    write(tmp_path / "gpu-audit.toml", "[check]\nmin_gpus = 1\n")  # not searched when given
    policy = load(path, search_from=tmp_path)
    assert policy.min_gpus == 8 and policy.own_processes == "fail"
    assert policy.source == f"{tmp_path / 'gpu-audit.toml'} + {path}"  # both were read


def test_policy_flag_pointing_at_pyproject_reads_its_check_table(tmp_path):
    path = write(tmp_path / "pyproject.toml", "[tool.gpu-audit.check]\nmin_gpus = 4\n")
    assert load(path).min_gpus == 4


def test_unknown_key_names_file_line_and_suggests(tmp_path):
    write(tmp_path / "pyproject.toml", """\
[tool.gpu-audit]
max_swap_used_gib = 8

[tool.gpu-audit.check]
min_gpus = 1
min_free_vram_pc = 50
""")
    with pytest.raises(ConfigError) as caught:
        load(search_from=tmp_path)
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
        load(search_from=tmp_path)
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
        ("max_swap_used_gib = -1", "'max_swap_used_gib' must not be negative"),
        ("max_swap_used_gib = nan", "must be a finite number"),
        ("swap = \"off\"", "'swap' must be one of 'fail', 'warn', 'ignore'"),
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
        load(path)
    message = str(caught.value)
    assert expected in message
    assert message.startswith(f"{path}:2:") or message.startswith(f"{path}:3:"), message


def test_toml_syntax_error_names_the_file(tmp_path):
    path = write(tmp_path / "policy.toml", "min_gpus = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(path)


def test_missing_policy_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="policy file not found"):
        load(tmp_path / "nope.toml")


def test_ignore_names_a_typo_with_a_suggestion_when_ids_are_known(tmp_path):
    path = write(tmp_path / "policy.toml", 'ignore = ["swap-presure"]\n')
    known = {"swap-pressure", "low-free-vram", "gpu-name"}
    with pytest.raises(ConfigError, match="did you mean 'swap-pressure'"):
        load(path, known_ids=known)
    ok = write(tmp_path / "ok.toml", 'ignore = ["swap-pressure", "gpu-name"]\n')
    assert load(ok, known_ids=known).ignore == ["swap-pressure", "gpu-name"]


def test_quoted_keys_and_spaced_headers_still_find_the_line(tmp_path):
    path = write(tmp_path / "pyproject.toml", """\
[tool.gpu-audit]
max_swap_used_gib = 3

[ tool . "gpu-audit" . check ]
"min_gpus" = "eight"
""")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert "pyproject.toml:5:" in str(caught.value)
