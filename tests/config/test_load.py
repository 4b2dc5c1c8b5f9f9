"""[tool.gpu-audit] and gpu-audit.toml: found, read, and rejected with file:line:key."""

from __future__ import annotations

import pytest

from gpu_audit.config import Policy, find_config_file, load_policy
from gpu_audit.errors import ConfigError


def test_defaults_without_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_policy() == Policy()


def test_pyproject_table_is_found_from_a_subfolder(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname="x"\n\n[tool.gpu-audit]\n'
        'max_swap_used_gib = 4\nignore = ["swap-pressure"]\n'
    )
    sub = tmp_path / "src" / "pkg"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert find_config_file() == tmp_path / "pyproject.toml"
    policy = load_policy()
    assert policy.max_swap_used_bytes == 4 * 1024**3
    assert policy.ignore == ["swap-pressure"]


def test_pyproject_without_our_table_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\n')
    monkeypatch.chdir(tmp_path)
    assert find_config_file() is None or find_config_file().parent != tmp_path


def test_unknown_key_names_file_line_and_suggestion(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text("# thresholds\nmax_swap_used_gb = 4\n")
    with pytest.raises(
        ConfigError,
        match=r"gpu-audit.toml:2: unknown key 'max_swap_used_gb' "
        r"\(did you mean 'max_swap_used_gib'\?\)",
    ):
        load_policy(path)


def test_wrong_type_and_bad_toml_are_config_errors(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text('min_free_vram_pct = "ten"\n')
    with pytest.raises(ConfigError, match="must be a number"):
        load_policy(path)
    path.write_text("min_free_vram_pct = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_policy(path)
    path.write_text('fail_on = "fatal"\n')
    with pytest.raises(ConfigError, match="fail_on"):
        load_policy(path)


def test_unreadable_file_is_a_config_error(tmp_path):
    folder = tmp_path / "policy.toml"
    folder.mkdir()  # unreadable as a file, even for root
    with pytest.raises(ConfigError, match="cannot read"):
        load_policy(folder)
    with pytest.raises(ConfigError, match="cannot read"):
        load_policy(tmp_path / "missing.toml")


def test_line_numbers_point_into_our_table_not_a_namesake_elsewhere(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[tool.other]\nignore = 1\n\n[ tool . "gpu-audit" ]\nignore = "swap-pressure"\n'
    )
    assert find_config_file(tmp_path) == path
    with pytest.raises(ConfigError, match=r"pyproject.toml:5: key 'ignore' must be a list"):
        load_policy(path)


def test_the_configuration_guide_points_at_the_settings_reference():
    # Every key is listed in docs/settings.md, generated from the schema (test_reference.py);
    # the scan guide keeps a short example and points there.
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "scan.md").read_text()
    section = guide.split("## Configuration\n", 1)[1].split("\n## ", 1)[0]
    assert "(../settings.md)" in section
    assert "GPU_AUDIT_<KEY>" in section


def test_scan_config_file_may_hold_other_commands_tables(tmp_path):
    path = tmp_path / "thresholds.toml"
    path.write_text("min_free_vram_pct = 25\n\n[check]\nmin_gpus = 2\n\n[validate]\ncycles = 5\n")
    policy = load_policy(path)
    assert policy.min_free_vram_pct == 25.0 and policy.source == str(path)


def test_negative_and_out_of_range_thresholds_are_config_errors(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text("# thresholds\nxid_recent_hours = -1\n")
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:2: key 'xid_recent_hours' must not be"):
        load_policy(path)
    path.write_text("alloc_fragmentation_pct = 120\n")
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:1: .*percentage \(0-100\)"):
        load_policy(path)
