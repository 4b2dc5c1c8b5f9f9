"""The CI examples work as written: their gpu-audit steps run here, exactly as they stand in
``examples/github-actions.yml`` and ``examples/gitlab-ci.yml``, against a fake healthy GPU.

Each example installs gpu-audit into a virtual environment of its own from ``GPU_AUDIT_SOURCE``
(here: this checkout), then runs ``gpu-audit check``. The steps that need the user's project
(its requirements, ``check --stages``, which imports its torch on the GPU, and training) are
not run; every step that installs or runs gpu-audit's checklist is.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import fakegpu
from tests.fakegpu import h100_node

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
pytestmark = pytest.mark.slow
fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml


def runnable(command: str) -> bool:
    """The steps that install gpu-audit or run its checklist; the project's own are left out."""
    if "--stages" in command or "requirements.txt" in command or "train.py" in command:
        return False
    return "gpu-audit" in command or "GPU_AUDIT_SOURCE" in command


def run_steps(commands: list[str], env: dict[str, str], cwd: Path) -> None:
    for command in commands:
        done = subprocess.run(["bash", "-e", "-c", command], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}\n{done.stderr}"
        if "GITHUB_PATH" in env and Path(env["GITHUB_PATH"]).exists():
            added = Path(env["GITHUB_PATH"]).read_text().split()
            env["PATH"] = os.pathsep.join([*added, env["PATH"]])


def job_env(fake_nvml, cli_env: dict, tmp_path: Path) -> dict[str, str]:
    env = fake_nvml(h100_node(1), base=cli_env)
    env.pop("PYTHONPATH", None)  # the job runs the gpu-audit it installed, not this checkout
    env["GPU_AUDIT_SOURCE"] = str(REPO)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_the_github_workflow_installs_and_runs_the_check(fake_nvml, cli_env, tmp_path):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    assert workflow["env"]["GPU_AUDIT_SOURCE"].startswith("git+https://")
    env = job_env(fake_nvml, cli_env, tmp_path)
    env.update(RUNNER_TEMP=str(tmp_path / "runner"), GITHUB_PATH=str(tmp_path / "github_path"))
    (tmp_path / "runner").mkdir()
    steps = [s["run"] for s in workflow["jobs"]["train"]["steps"] if "run" in s]
    commands = [c for c in steps if runnable(c)]
    assert any("pip install" in c for c in commands) and any("gpu-audit check" in c
                                                            for c in commands)
    assert not any("pip install --upgrade gpu-audit" in c for c in steps)
    work = tmp_path / "work"
    work.mkdir()
    run_steps(commands, env, work)
    assert (work / "reports" / "gpu-audit.xml").is_file()
    installed = Path(tmp_path / "runner" / "gpu-audit" / "bin" / "gpu-audit")
    assert installed.is_file()


def _flatten(items: list) -> list[str]:
    return [c for item in items for c in (_flatten(item) if isinstance(item, list) else [item])]


def test_the_gitlab_job_installs_and_runs_the_check(fake_nvml, cli_env, tmp_path):
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    assert pipeline["variables"]["GPU_AUDIT_SOURCE"].startswith("git+https://")
    job = pipeline["train"]
    env = job_env(fake_nvml, cli_env, tmp_path)
    env["CI_BUILDS_DIR"] = str(tmp_path / "builds")
    (tmp_path / "builds").mkdir()
    commands = [c for c in _flatten(job["before_script"]) + job["script"] if runnable(c)]
    work = tmp_path / "work"
    work.mkdir()
    # GitLab runs a job's lines in one shell, so `export PATH=...` carries to the next line.
    run_steps(["\n".join(commands)], env, work)
    assert (work / "gpu-audit.xml").is_file()
    assert not any("pip install --upgrade gpu-audit" in c
                   for c in _flatten(job["before_script"]) + job["script"])
