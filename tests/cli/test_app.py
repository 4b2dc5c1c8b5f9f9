"""The command-line front door: help, version, usage errors and the exit codes they map to."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_audit import __version__
from gpu_audit.cli.app import COMMANDS


def gpu_audit(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_version_and_help(cli_env):
    version = gpu_audit(["--version"], cli_env)
    assert version.returncode == 0 and version.stdout.strip() == f"gpu-audit {__version__}"
    top = gpu_audit(["--help"], cli_env)
    assert top.returncode == 0
    for command in COMMANDS:
        assert command in top.stdout


def test_the_app_module_runs_as_the_command(cli_env):
    # ``python -m gpu_audit.cli.app`` is the same command, not a silent no-op.
    done = subprocess.run([sys.executable, "-m", "gpu_audit.cli.app", "--version"], env=cli_env,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, f"gpu-audit {__version__}")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_and_maps_usage_errors_to_unknown(cli_env, command):
    helped = gpu_audit([command, "--help"], cli_env)
    assert helped.returncode == 0, helped.stderr
    assert "Usage: gpu-audit" in helped.stdout
    wrong = gpu_audit([command, "--no-such-flag"], cli_env)
    assert wrong.returncode == 3, wrong.stderr
    assert "No such option" in wrong.stderr
    assert "internal error" not in wrong.stderr and "Traceback" not in wrong.stderr


def test_unknown_command_is_a_usage_error(cli_env):
    result = gpu_audit(["frobnicate"], cli_env)
    assert result.returncode == 3
    assert "No such command" in result.stderr
    assert "internal error" not in result.stderr


def _help_texts(command: str) -> list[str]:
    """Every option help text of ``command`` as written in its module."""
    import importlib

    import typer

    from gpu_audit.cli.app import app

    importlib.import_module(f"gpu_audit.cli.{COMMANDS[command]}")
    group = typer.main.get_group(app)
    click_command = group.commands[command]
    commands = getattr(click_command, "commands", {}).values() or [click_command]
    return [p.help for c in commands for p in c.params if getattr(p, "help", None)]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_shows_square_brackets_as_written(cli_env, command):
    """``[tool.gpu-audit]`` in a help text is a TOML table, not console markup to swallow."""
    bracketed = {word for text in _help_texts(command)
                 for word in __import__("re").findall(r"\[[a-z][\w.-]*\]", text)}
    helped = gpu_audit([command, "--help"], dict(cli_env, COLUMNS="400"))
    assert helped.returncode == 0
    shown = __import__("re").sub(r"-\s+", "-", " ".join(helped.stdout.split()))  # unwrapped
    missing = [word for word in sorted(bracketed) if word not in shown]
    assert not missing, f"{command} --help lost {missing}"


def test_validate_config_help_names_its_tables(cli_env):
    helped = gpu_audit(["validate", "--help"], dict(cli_env, COLUMNS="400"))
    assert "Read [tool.gpu-audit] / [tool.gpu-audit.validate] from this file." in " ".join(
        helped.stdout.split())


def test_verbose_works_after_the_command_and_is_a_counter(cli_env):
    from gpu_audit.cli.app import hoist_verbose

    assert hoist_verbose(["scan", "-v", "--json"]) == ["-v", "scan", "--json"]
    assert hoist_verbose(["validate", "-vv", "--", "python", "t.py", "-v"]) == [
        "-vv", "validate", "--", "python", "t.py", "-v"]
    result = gpu_audit(["scan", "-v", "--timeout", "nope"], cli_env)
    assert "No such option: -v" not in result.stderr
    assert result.returncode == 3
    top = gpu_audit(["--help"], cli_env)
    assert "[default: 0]" not in top.stdout


def test_scan_help_states_the_exit_codes(cli_env):
    helped = " ".join(gpu_audit(["scan", "--help"], cli_env).stdout.split())
    assert "Exit codes" in helped and "130 interrupted" in helped


def test_command_list_shows_each_first_sentence_whole(cli_env):
    """"e.g." inside a summary does not end it: diff's line reads to its full stop."""
    top = gpu_audit(["--help"], dict(cli_env, COLUMNS="400"))
    assert "What changed between two scans of one machine, e.g. before and after a job." \
        in top.stdout


def test_first_sentence_passes_over_abbreviations():
    from gpu_audit.cli.declared import first_sentence

    assert first_sentence("Compare, e.g. two scans. More here.") == "Compare, e.g. two scans."
    assert first_sentence("One line\nwrapped. Two.") == "One line wrapped."
    assert first_sentence("No stop at all\n\nNext paragraph.") == "No stop at all"
