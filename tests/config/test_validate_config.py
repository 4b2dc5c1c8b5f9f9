"""``[tool.gpu-audit.validate]`` (``[validate]`` in gpu-audit.toml): read where the other tables
are, with errors at the file, line and key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpu_audit.config import read_validate_config, read_validate_environment
from gpu_audit.config.validate_config import VALIDATE_KEYS
from gpu_audit.errors import ConfigError


def _pyproject(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\n\n[tool.gpu-audit.validate]\n" + body)
    return path


def test_every_key_names_a_validate_option() -> None:
    from gpu_audit.validate.plan import ValidateOptions

    fields = {f.name for f in dataclasses.fields(ValidateOptions)}
    assert {option for option, _ in VALIDATE_KEYS.values()} <= fields


def test_values_come_back_as_options(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, 'cycles = 40\ncheckpoint_every_pct = 5\nemulate_memory = 1024\n'
                                'max_split_size_mb = 128\nrequire = ["phi>0.3"]\n'
                                'metrics = { loss = "loss=(\\\\S+)" }\n')
    values = read_validate_config(path)
    assert values == {"cycles": 40, "checkpoint_every": "5.0", "emulate_memory": "1024",
                      "max_split_size_mb": "128", "requires": ["phi>0.3"],
                      "metrics": {"loss": "loss=(\\S+)"}, "config_dir": str(tmp_path.resolve())}


def test_the_own_file_reads_its_validate_table(tmp_path: Path) -> None:
    path = tmp_path / "gpu-audit.toml"
    path.write_text("min_free_vram_pct = 20\n\n[validate]\ncycles = 7\n")
    assert read_validate_config(path)["cycles"] == 7


def test_an_absent_table_sets_nothing(tmp_path: Path) -> None:
    path = tmp_path / "gpu-audit.toml"
    path.write_text("min_free_vram_pct = 20\n")
    assert read_validate_config(path) == {"config_dir": str(tmp_path.resolve())}


@pytest.mark.parametrize(("body", "line", "message"), [
    ("cycles = 4\ncylces = 40\n", 6, "unknown key 'cylces' (did you mean 'cycles'?)"),
    ('cycles = "many"\n', 5, "key 'cycles' must be an integer, got 'many'"),
    ("max_split_size_mb = [128, true]\n", 5,
     "key 'max_split_size_mb' must be an integer or a list of integers, got [128, True]"),
    ("metrics = { loss = 3 }\n", 5, "key 'metrics' must be a table of strings"),
    ("command = []\n", 5, "key 'command' is empty: name the program"),
    ("disable_quantum = 1\n", 5, "key 'disable_quantum' must be true or false, got 1"),
])
def test_bad_values_name_file_line_and_key(tmp_path: Path, body: str, line: int,
                                           message: str) -> None:
    path = _pyproject(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        read_validate_config(path)
    assert str(info.value).startswith(f"{path}:{line}: {message}")
    assert "\n" not in str(info.value)


def test_environment_variables_do_not_set_validate_keys(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_AUDIT_CYCLES", "9")
    monkeypatch.setenv("GPU_AUDIT_DEVICE", "cpu")
    path = _pyproject(tmp_path, "cycles = 40\n")
    values = read_validate_config(path)
    assert values["cycles"] == 40
    assert "device" not in values


def test_variables_come_back_as_options_in_the_flags_forms() -> None:
    environ = {"GPU_AUDIT_VALIDATE_CYCLES": "40", "GPU_AUDIT_VALIDATE_STAGES": "smoke,classical",
               "GPU_AUDIT_VALIDATE_MAX_SPLIT_SIZE_MB": "none,128",
               "GPU_AUDIT_VALIDATE_CHECKPOINT_EVERY_PCT": "5",
               "GPU_AUDIT_VALIDATE_DISABLE_QUANTUM": "yes",
               "GPU_AUDIT_VALIDATE_REQUIRE": "phi>0.3, mean(phi)>=0.5",
               "GPU_AUDIT_VALIDATE_BATCH": "", "GPU_AUDIT_CYCLES": "7", "GPU_AUDIT_STAGES": "x"}
    assert read_validate_environment(environ) == {
        "cycles": 40, "stages": ["smoke", "classical"], "max_split_size_mb": "none,128",
        "checkpoint_every": "5.0", "disable_quantum": True,
        "requires": ["phi>0.3", "mean(phi)>=0.5"], "batch": None}


@pytest.mark.parametrize(("name", "value", "message"), [
    ("GPU_AUDIT_VALIDATE_CYCLES", "forty", "key 'cycles' must be an integer, got 'forty'"),
    ("GPU_AUDIT_VALIDATE_HANG_FACTOR", "inf", "key 'hang_factor' must be a number"),
    ("GPU_AUDIT_VALIDATE_QUANTUM_LITE", "maybe", "key 'quantum_lite' must be true or false"),
])
def test_a_bad_variable_is_named(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"environment variable {name}: {message}"):
        read_validate_environment({name: value})


@pytest.mark.parametrize(("name", "value", "message"), [
    ("GPU_AUDIT_VALIDATE_CYCLES", "-5", "key 'cycles' must lie between 1 and 1000000000, got -5"),
    ("GPU_AUDIT_VALIDATE_MAX_RETRIES", "50", "key 'max_retries' must lie between 0 and 20"),
    ("GPU_AUDIT_VALIDATE_HANG_MIN_S", "0", "key 'hang_min_s' must be above 0 and at most"),
    ("GPU_AUDIT_VALIDATE_BATCH", "0", "key 'batch' must lie between 1 and"),
])
def test_a_variable_out_of_its_range_is_named_not_the_flag(name: str, value: str,
                                                            message: str) -> None:
    # The range is the schema's, whichever way the value came: the message names its origin.
    with pytest.raises(ConfigError, match=f"^environment variable {name}: {message}"):
        read_validate_environment({name: value})


def test_a_file_value_out_of_its_range_is_named_at_its_line(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, "seed = 1\nretry_backoff_s = 1e9\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml:6: key 'retry_backoff_s' must lie "
                                          r"between 0 and 1e\+07, got 1000000000.0"):
        read_validate_config(path)


def test_values_within_their_ranges_pass() -> None:
    environ = {"GPU_AUDIT_VALIDATE_SEED": "-1", "GPU_AUDIT_VALIDATE_MAX_RETRIES": "0",
               "GPU_AUDIT_VALIDATE_CYCLES": "1000000000"}
    assert read_validate_environment(environ) == {"seed": -1, "max_retries": 0,
                                                  "cycles": 1000000000}
