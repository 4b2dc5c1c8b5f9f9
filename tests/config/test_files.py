"""The TOML helpers every table reader shares: lines for messages, types, unknown keys."""

from __future__ import annotations

import pytest

from gpu_audit.config import check_value, key_line, unknown_key_error
from gpu_audit.errors import ConfigError


def test_key_line_finds_the_key_in_our_table_only(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.other]\ncycles = 1\n\n[[tool.gpu-audit.runs]]\ncycles = 2\n\n'
                    '[tool."gpu-audit".validate]\ncycles = 3\n[tool.gpu-audit.validate.nested]\n')
    assert key_line(path, "cycles", ("validate",)) == 8
    assert key_line(path, "nested", ("validate",)) == 9  # the key is itself a table
    assert key_line(path, "cycles") is None
    top = tmp_path / "policy.toml"
    top.write_text("min_gpus = 1\n[check]\nmin_gpus = 2\n")
    assert key_line(top, "min_gpus") == 1 and key_line(top, "min_gpus", ("check",)) == 3


def test_check_value_and_unknown_key_name_file_and_line(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text("[validate]\ncycles = 1.5\ncylces = 3\n")
    assert check_value(path, "cycles", 3, float, [], ("validate",)) == 3.0
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:2: key 'cycles' must be an integer"):
        check_value(path, "cycles", 1.5, int, ["cycles"], ("validate",))
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:\?: key 'x' must be true or false"):
        check_value(path, "x", 1, bool)  # not found in the text: the message still names it
    error = unknown_key_error(path, "cylces", ["cycles"], ("validate",))
    assert str(error) == f"{path}:3: unknown key 'cylces' (did you mean 'cycles'?)"
