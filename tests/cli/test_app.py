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
