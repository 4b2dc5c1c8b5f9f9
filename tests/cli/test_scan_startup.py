"""What ``gpu-audit scan --json`` loads: only what a scan uses, so a Slurm prolog or a CI step that
runs it per job pays for no more start-up than it needs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]

LOADED = """
import contextlib, io, json, sys
from gpu_audit.cli.app import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["scan", "--json", "--no-report"])
from gpu_audit.knowledge import findings
print(json.dumps({"code": code, "gpus": len(json.loads(out.getvalue())["gpus"]),
                  "modules": sorted(sys.modules), "docs_parsed": len(findings._DOCS)}))
"""

# Loaded by none of a JSON scan's steps: other commands' code, the terminal renderer and its
# rich, the running-process monitor (threads, logging), importlib.metadata and its email parser.
NOT_FOR_A_JSON_SCAN = [
    "rich",
    "gpu_audit.report.terminal",
    "gpu_audit.monitor.core",
    "gpu_audit.monitor.oom_snapshot",
    "logging",
    "importlib.metadata",
    "email",
    "gpu_audit.validate",
    "gpu_audit.explain",
    "gpu_audit.check",
    "torch",
    "pandas",
    "matplotlib",
    "prometheus_client",  # --prometheus only
    # A plain `scan --json --no-report` line is parsed without typer (gpu_audit.cli.declared):
    # ~30 ms less on every start. (The host's OS and kernel come from os.uname(), but msgspec,
    # which the scan's model is made of, imports `platform` itself.)
    "typer",
    "click",
    "gpu_audit.cli.typer_app",
    # No runtime folder, so no publications: their reader is not imported.
    "gpu_audit.collect.monitor_files",
    # "Did you mean" for a misspelt finding id only (its import compiles patterns).
    "difflib",
    # The published JSON Schemas and every document type: `python -m gpu_audit.schemas` only.
    "gpu_audit.schemas",
    # Host and process figures come from /proc on Linux (gpu_audit.collect.procfs).
    "psutil",
]


def test_a_json_scan_loads_only_what_it_uses(fake_nvml, cli_env, tmp_path: Path):
    env = fake_nvml(h100_node(2), base=cli_env)
    env["GPU_AUDIT_RUNTIME_DIR"] = str(tmp_path / "no-monitor-here")
    completed = subprocess.run(
        [sys.executable, "-c", LOADED], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["code"] in (0, 1, 2) and result["gpus"] == 2  # it did scan the machine
    modules = set(result["modules"])
    assert {"gpu_audit.collect.nvml.isolated", "gpu_audit.rules.health"} <= modules
    # With a second CPU the read runs in a child process: pynvml, ctypes and the NVML reader
    # are loaded there, not here.
    reader = {"pynvml", "ctypes", "gpu_audit.collect.nvml.device"}
    if len(os.sched_getaffinity(0)) > 1:
        assert sorted(modules & reader) == []
    else:
        assert {"pynvml", "gpu_audit.collect.nvml.device"} <= modules
    assert sorted(modules.intersection(NOT_FOR_A_JSON_SCAN)) == []
    # The rules register their documentation; nothing parses it until someone reads it.
    assert result["docs_parsed"] == 0
    if importlib.util.find_spec("typer._click") is not None:
        # typer carries its own copy of click: importing click itself as well would cost ~20 ms.
        assert "click" not in modules


CHECKED = LOADED.replace('"scan", "--json"', '"check", "--json"').replace(
    '["gpus"]', '["snapshot"]["gpus"]')

# A plain `check --json` line (a CI step, a cron job) runs without typer too, and pays for no
# heavy optional dependency: those belong to validate's stages, fleet and explain.
NOT_FOR_A_JSON_CHECK = [
    "typer",
    "click",
    "gpu_audit.cli.typer_app",
    "rich",
    "gpu_audit.report.terminal",
    "torch",
    "pandas",
    "matplotlib",
    "prometheus_client",  # --prometheus only
    "gpu_audit.explain",
    "gpu_audit.monitor.core",
    # The other commands' finding catalogues serve only to accept an `ignore` id that names
    # one of their findings: a policy without such ids never loads them.
    "gpu_audit.validate",
    "gpu_audit.diag",
    "gpu_audit.diff",
]


def test_a_json_check_loads_neither_typer_nor_heavy_dependencies(fake_nvml, cli_env,
                                                                  tmp_path: Path):
    env = fake_nvml(h100_node(2), base=cli_env)
    env["GPU_AUDIT_RUNTIME_DIR"] = str(tmp_path / "no-monitor-here")
    completed = subprocess.run(
        [sys.executable, "-c", CHECKED], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["code"] in (0, 1, 2) and result["gpus"] == 2  # it did check the machine
    modules = set(result["modules"])
    assert {"gpu_audit.check.engine", "gpu_audit.collect.nvml.isolated"} <= modules
    assert ("pynvml" in modules) == (len(os.sched_getaffinity(0)) == 1)
    assert sorted(modules.intersection(NOT_FOR_A_JSON_CHECK)) == []


FROZEN_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count(), file=sys.stderr))
sys.argv = ["gpu-audit", "scan", "--json", "--no-report"]
from gpu_audit.cli.app import run
run()
"""


def test_the_command_spares_the_interpreter_its_final_collection(fake_nvml, cli_env,
                                                                   tmp_path: Path):
    """What start-up built is frozen as the command ends: the last collection skips it."""
    env = fake_nvml(h100_node(2), base=cli_env)
    completed = subprocess.run(
        [sys.executable, "-c", FROZEN_AT_EXIT], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
    )
    assert completed.returncode in (0, 1, 2), completed.stderr
    assert json.loads(completed.stdout)["gpus"]  # the scan's output is whole
    frozen = int(completed.stderr.split("frozen ")[1].split()[0])
    assert frozen > 10_000  # modules, classes and functions: everything start-up built
