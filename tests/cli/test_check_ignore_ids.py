"""``check`` accepts and refuses ``ignore`` ids as before, reading them from the base finding
catalogue: naming another command's id (validate, diff, diag) loads none of its modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]

RUN = """
import contextlib, io, json, sys
from gpu_audit.cli.app import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["check", "--json", "--no-report"])
print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules if m.startswith((
    "gpu_audit.validate", "gpu_audit.diag", "gpu_audit.diff")))}))
"""


def checked(ignore: list[str], fake_nvml, cli_env, tmp_path: Path) -> \
        subprocess.CompletedProcess[str]:
    (tmp_path / "gpu-audit.toml").write_text(f"ignore = {json.dumps(ignore)}\n")
    env = fake_nvml(h100_node(1), base=cli_env)
    env["GPU_AUDIT_RUNTIME_DIR"] = str(tmp_path / "no-monitor-here")
    return subprocess.run([sys.executable, "-c", RUN], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("ignore", "loaded"), [
    (["swap-pressure", "gpu-count"], False),  # a scan finding and a check
    (["stage-hung"], False),  # validate's
    (["diag-memory-error"], False),  # diag's
])
def test_ignore_ids_of_every_command_are_accepted(ignore, loaded, fake_nvml, cli_env, tmp_path):
    done = checked(ignore, fake_nvml, cli_env, tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["code"] in (0, 1, 2)
    assert bool(result["modules"]) is loaded, result["modules"]


@pytest.mark.parametrize(("typo", "hint"), [
    ("gpu-tempreature", "did you mean 'gpu-temperature'?"),
    ("diag-memory-eror", "did you mean 'diag-memory-error'?"),  # suggested from diag's ids
    ("no-such-thing-at-all", "`gpu-audit rules` lists them"),
])
def test_an_unknown_ignore_id_is_refused_with_its_suggestion(typo, hint, fake_nvml, cli_env,
                                                              tmp_path):
    done = checked(["swap-pressure", typo], fake_nvml, cli_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["code"] == 3
    assert (f"gpu-audit.toml:1: key 'ignore': unknown finding or check id {typo!r} ({hint})"
            in done.stderr), done.stderr
