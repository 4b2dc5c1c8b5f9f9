"""gpu-audit.toml (or a --config file) may hold its settings at the top level or in the
[tool.gpu-audit] table pasted from a pyproject.toml; anything else is refused, naming it."""

from __future__ import annotations

import pytest

from gpu_audit.config import load_policy
from gpu_audit.config.check_policy import load_check_policy
from gpu_audit.errors import ConfigError


@pytest.mark.parametrize("name", ["gpu-audit.toml", "team-policy.toml"])
def test_the_pyproject_table_form_is_read_from_any_file(tmp_path, name):
    path = tmp_path / name
    path.write_text('[tool.gpu-audit]\nmin_free_vram_pct = 33\nignore = ["swap-pressure"]\n\n'
                    '[tool.gpu-audit.check]\nmin_gpus = 4\n')
    policy = load_policy(path, environ={})
    assert policy.min_free_vram_pct == 33
    assert policy.ignore == ["swap-pressure"]
    check = load_check_policy(path, environ={})
    assert (check.min_gpus, check.min_free_vram_pct) == (4, 33)


def test_the_top_level_form_still_works(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text("min_free_vram_pct = 33\n\n[check]\nmin_gpus = 4\n")
    assert load_policy(path, environ={}).min_free_vram_pct == 33
    assert load_check_policy(path, environ={}).min_gpus == 4


def test_errors_in_the_table_form_name_the_line(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text("[tool.gpu-audit]\n# comment\nmin_free_vram = 33\n")
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:3: .*min_free_vram"):
        load_policy(path, environ={})


@pytest.mark.parametrize(("text", "named"), [
    ("[tool.ruff]\nline-length = 99\n", r"\[tool\.ruff\] is not a gpu-audit table"),
    ("min_gpus = 1\n[tool.gpu-audit]\nmin_free_vram_pct = 5\n", r"'min_gpus' is outside"),
    ("[tool.gpu-audit.chek]\nmin_gpus = 4\n", r"unknown table \[tool\.gpu-audit\.chek\]"),
    ("min_free_vram_pct = 5\n[mystery]\nx = 1\n", r"unknown table \[mystery\]"),
])
def test_a_table_nobody_reads_is_an_error_naming_it(tmp_path, text, named):
    path = tmp_path / "gpu-audit.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=named):
        load_policy(path, environ={})
