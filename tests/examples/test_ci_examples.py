"""The CI examples work as written: every shell step of ``examples/github-actions.yml`` and
``examples/gitlab-ci.yml`` runs here, in order and as it stands, against a fake GPU.

gpu-audit is installed from this checkout (``GPU_AUDIT_SOURCE``) into a virtual environment of
its own, as the examples say. The job's Python (what ``actions/setup-python`` or the job's image
gives) is played by this interpreter's base Python, and the project's installed torch by a
folder on ``PYTHONPATH`` holding this environment's torch: so ``check --stages`` judges the torch
the project brings, not one of gpu-audit's. The ``uses:`` steps (checkout, setup-python, upload)
are GitHub's own and are not run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from junitparser import Failure, JUnitXml

from tests import fakegpu
from tests.fakegpu import h100_node

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None,
                                 reason="the project's torch is played by this environment's")]
fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

# What `import torch` and a CPU training cycle need, beside torch itself.
TORCH_PACKAGES = ("torch", "torchgen", "functorch", "typing_extensions.py", "sympy", "mpmath",
                  "networkx", "jinja2", "markupsafe", "filelock", "fsspec")
PROJECT_POLICY = """\
[tool.gpu-audit]
# Findings about the machine running the tests (its swap, its RAM) are not what this is about.
ignore = ["swap-pressure", "low-host-memory"]

[tool.gpu-audit.check]
min_gpus = 0  # the tests' torch is a CPU build: the stages run on the CPU
"""
TRAIN = "import sys, torch\nopen('trained-with', 'w').write(sys.prefix + ' ' + torch.__file__)\n"


def project(tmp_path: Path) -> Path:
    """A project checkout: its policy, its requirements, its training script."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text(PROJECT_POLICY)
    (work / "requirements.txt").write_text("# the project's requirements (torch is installed)\n")
    (work / "train.py").write_text(TRAIN)
    return work


def job_site(tmp_path: Path) -> Path:
    """The job Python's installed packages: this environment's torch and what it imports."""
    import torch

    site = Path(torch.__file__).parents[1]
    folder = tmp_path / "job-site"
    folder.mkdir()
    for name in (*TORCH_PACKAGES, *(p.name for p in site.glob("torch-*.dist-info"))):
        if (site / name).exists():
            (folder / name).symlink_to(site / name)
    return folder


def job_env(fake_nvml, cli_env: dict, tmp_path: Path) -> dict[str, str]:
    env = fake_nvml(h100_node(1), base=cli_env)
    bin_dir = tmp_path / "job-bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):  # the job's Python: a plain interpreter, no venv
        (bin_dir / name).symlink_to(getattr(sys, "_base_executable", sys.executable))
    env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
    env["PYTHONPATH"] = str(job_site(tmp_path))  # the project's torch, not this checkout
    env["GPU_AUDIT_SOURCE"] = str(REPO)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.pop("VIRTUAL_ENV", None)
    return env


def run(command: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", command], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def broken_torch(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """The same job where the project's torch does not import."""
    shadow = tmp_path / "broken" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('libcudart.so.12: cannot open')\n")
    return dict(env, PYTHONPATH=os.pathsep.join([str(shadow.parent), env["PYTHONPATH"]]))


def stage_cases(path: Path) -> dict[str, object]:
    return {case.name: case for suite in JUnitXml.fromfile(str(path)) for case in suite}


def test_the_github_workflow_runs_as_written(fake_nvml, cli_env, tmp_path):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    assert workflow["env"]["GPU_AUDIT_SOURCE"].startswith("git+https://")
    steps = [s for s in workflow["jobs"]["train"]["steps"] if "run" in s]
    env = job_env(fake_nvml, cli_env, tmp_path)
    runner = tmp_path / "runner"
    runner.mkdir()
    files = {name: tmp_path / name.lower() for name in ("GITHUB_ENV", "GITHUB_PATH",
                                                        "GITHUB_STEP_SUMMARY")}
    env.update(RUNNER_TEMP=str(runner), GITHUB_ACTIONS="true",
               **{name: str(path) for name, path in files.items()})
    work = project(tmp_path)
    for step in steps:
        done = run(step["run"], env, work)
        assert done.returncode == 0, f"{step['name']}:\n{done.stdout}\n{done.stderr}"
        if files["GITHUB_ENV"].exists():  # what the runner does between steps
            env.update(line.split("=", 1) for line in files["GITHUB_ENV"].read_text().split("\n")
                       if "=" in line)
    # gpu-audit stayed off the project's PATH; the project trained with its own Python.
    assert not files["GITHUB_PATH"].exists() or not files["GITHUB_PATH"].read_text().strip()
    prefix, torch_file = (work / "trained-with").read_text().split()
    assert not prefix.startswith(str(runner)) and torch_file.startswith(env["PYTHONPATH"])
    # Both checks wrote their JUnit files; the stages judged the project's torch.
    assert (work / "reports" / "gpu-audit.xml").is_file()
    stages = stage_cases(work / "reports" / "gpu-audit-stages.xml")
    assert stages["stage-imports"].is_passed and stages["stage-smoke"].is_passed
    assert "gpu-audit check" in files["GITHUB_STEP_SUMMARY"].read_text()

    # The project's torch broken: the step fails the job, and the JUnit file says why.
    stages_step = next(s for s in steps if "--stages" in s["run"])
    (work / "reports" / "gpu-audit-stages.xml").unlink()
    failed = run(stages_step["run"], broken_torch(tmp_path, env), work)
    assert failed.returncode != 0 and "exit code 2 (CRITICAL)" in failed.stdout, failed.stderr
    (failure,) = stage_cases(work / "reports" / "gpu-audit-stages.xml")["stage-imports"].result
    assert isinstance(failure, Failure) and "torch" in failure.message


def _flatten(items: list) -> list[str]:
    return [c for item in items for c in (_flatten(item) if isinstance(item, list) else [item])]


def test_the_gitlab_job_runs_as_written(fake_nvml, cli_env, tmp_path):
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    variables = pipeline["variables"]
    assert variables["GPU_AUDIT_SOURCE"].startswith("git+https://")
    job = pipeline["train"]
    env = job_env(fake_nvml, cli_env, tmp_path)
    env["CI_BUILDS_DIR"] = str(tmp_path / "builds")
    (tmp_path / "builds").mkdir()
    env["GPU_AUDIT"] = os.path.expandvars(variables["GPU_AUDIT"].replace(
        "$CI_BUILDS_DIR", env["CI_BUILDS_DIR"]))
    work = project(tmp_path)
    # GitLab runs a job's lines in one shell and stops at the first that fails.
    done = run("\n".join(_flatten(job["before_script"]) + job["script"]), env, work)
    assert done.returncode == 0, done.stdout + done.stderr
    for report in _flatten([job["artifacts"]["reports"]["junit"]]):
        assert (work / report).is_file(), report
    stages = stage_cases(work / "reports" / "gpu-audit-stages.xml")
    assert stages["stage-imports"].is_passed
    prefix, _ = (work / "trained-with").read_text().split()
    assert not prefix.startswith(env["CI_BUILDS_DIR"])
