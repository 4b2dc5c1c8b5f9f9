"""Configuration files that are not what they seem: broken files above the working folder are
skipped (with a warning when they cannot be read), huge numbers and deep nesting are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.config import files, load_policy
from gpu_audit.config.files import find_config_file, read_table
from gpu_audit.errors import ConfigError


def test_an_unreadable_pyproject_above_is_skipped_with_a_warning(tmp_path, monkeypatch, capsys):
    above = tmp_path / "pyproject.toml"
    above.write_text('[tool.gpu-audit]\nfail_on = "warning"\n')
    work = tmp_path / "work"
    work.mkdir()

    def denied(file, *args, **kwargs):  # root reads any file: the refusal is played
        if Path(file) == above:
            raise PermissionError(13, "Permission denied", str(file))
        return open(file, *args, **kwargs)

    monkeypatch.setattr(files, "open", denied, raising=False)
    assert find_config_file(work) is None
    assert f"skipping {above}: cannot read it (Permission denied)" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["tool = 1\n", "tool = 'gpu-audit'\n",
                                  "[tool]\ngpu-audit = 3\n"])
def test_a_pyproject_whose_tool_is_not_a_table_is_not_ours(tmp_path, text):
    (tmp_path / "pyproject.toml").write_text(text)
    assert find_config_file(tmp_path) is None


def test_a_chosen_pyproject_whose_tool_is_not_a_table_is_an_error(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("tool = 1\n")
    with pytest.raises(ConfigError, match="'tool' must be a table"):
        read_table(path)


@pytest.mark.parametrize(("text", "match"), [
    ("min_free_vram_pct = " + "7" * 4400 + "\n", "4300 digits"),
    ("min_free_vram_pct = " + "7" * 320 + "\n", "far too large"),
    ("xid_recent_hours = 1e200\n", "too large"),
    ("min_free_vram_pct = -inf\n", "finite"),
    ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
])
def test_numbers_and_nesting_beyond_reason(tmp_path, text, match):
    path = tmp_path / "gpu-audit.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_policy(path, environ={})


def test_ignore_ids_are_checked_when_known_ids_are_given(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text('ignore = ["swap-presure"]\n')
    assert load_policy(path, environ={}).ignore == ["swap-presure"]  # nothing to check against
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:1: .*'swap-presure' \(did you mean "
                                          r"'swap-pressure'\?\)"):
        load_policy(path, environ={}, known_ids=lambda: {"swap-pressure"})
    with pytest.raises(ConfigError, match="GPU_AUDIT_IGNORE"):
        load_policy(None, search=False, environ={"GPU_AUDIT_IGNORE": "nope"},
                    known_ids=lambda: {"swap-pressure"})
