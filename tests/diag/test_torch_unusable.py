"""A torch that cannot use a GPU (not installed, or a CPU-only build) is software, not the
machine: diag gives no verdict (exit 3, UNKNOWN) with one message naming the torch it found and
the install of a CUDA build; a CUDA build that cannot use the GPU stays ``diag-cuda-failed``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpu_audit.diag.judge import judge
from gpu_audit.diag.results import GpuRun, WorkerOutcome
from gpu_audit.model import Severity
from tests import fakegpu
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

CPU_BUILD = WorkerOutcome(
    status="fatal", test="import-torch", kind="torch-build",
    reason="torch 2.5.1+cpu is a CPU-only build (torch.version.cuda is None): it cannot use an "
           "NVIDIA GPU",
    facts={"variant": "cpu-only", "torch_version": "2.5.1+cpu", "python": "/venv/bin/python"},
    ready={"torch_version": "2.5.1+cpu", "torch_cuda": None})


def runs(worker: WorkerOutcome, count: int = 2) -> list[GpuRun]:
    return [GpuRun(index=i, name="NVIDIA H100 80GB HBM3", worker=worker) for i in range(count)]


def test_a_cpu_only_build_is_no_verdict_said_once_with_the_cuda_install() -> None:
    out = judge(1, runs(CPU_BUILD), driver_cuda="12.4")
    assert out.findings == [] and out.exit_code == 3
    assert len(out.unknown) == 1 and "torch 2.5.1+cpu is a CPU-only build" in out.unknown[0]
    assert "no verdict" in out.unknown[0]
    unusable = out.torch_unusable
    assert unusable["problem"] == "cpu-only-build" and unusable["torch_cuda"] is None
    assert unusable["torch_version"] == "2.5.1+cpu"
    # The remedy is the project's one install advice, for this driver's CUDA.
    from gpu_audit.knowledge.torch_builds import install_command

    assert unusable["remedy"] == install_command("2.5.1+cpu", "12.4")
    assert "torch==2.5.1" in unusable["remedy"] and "/whl/cu124" in unusable["remedy"]


def test_torch_not_installed_is_no_verdict_either() -> None:
    missing = WorkerOutcome(status="fatal", kind="torch-missing",
                            reason="torch does not import: ModuleNotFoundError: No module named "
                                   "'torch'", facts={"python": "/venv/bin/python"})
    out = judge(2, runs(missing, 1), driver_cuda="12.8")
    assert out.findings == [] and out.exit_code == 3
    assert out.torch_unusable["problem"] == "not-installed"
    assert "torch is not installed for /venv/bin/python" in out.unknown[0]
    assert out.torch_unusable["remedy"].startswith("pip install torch --index-url")
    assert "/whl/cu128" in out.torch_unusable["remedy"]


def test_a_cuda_build_that_cannot_reach_the_gpu_still_fails_the_gpu() -> None:
    broken = WorkerOutcome(status="fatal", kind="cuda",
                           reason="CUDA does not initialise: torch finds no usable CUDA device",
                           ready={"torch_version": "2.5.1+cu124", "torch_cuda": "12.4"})
    out = judge(1, runs(broken, 1), driver_cuda="12.4")
    assert [f.id for f in out.findings] == ["diag-cuda-failed"]
    assert out.findings[0].severity is Severity.CRITICAL and out.exit_code == 2
    assert out.torch_unusable is None


def _cpu_torch_only() -> None:
    pytest.importorskip("torch")
    from tests.conftest import cuda_available

    if cuda_available():
        pytest.skip("this machine's torch has CUDA")
    import torch

    if torch.version.cuda is not None:
        pytest.skip("this torch is a CUDA build")


def test_diag_on_a_cpu_only_torch_exits_unknown_with_the_install(fake_nvml, cli_env,
                                                                  tmp_path) -> None:
    _cpu_torch_only()
    import torch

    env = fake_nvml(h100_node(2), base=cli_env)
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--level", "2", "--json",
                           "--out", str(tmp_path / "r")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    doc = json.loads(done.stdout)
    assert doc["summary"]["verdict"] == "UNKNOWN" and doc["findings"] == []
    assert doc["torch_version"] == torch.__version__
    unusable = doc["torch_unusable"]
    assert unusable["problem"] == "cpu-only-build" and unusable["torch_cuda"] is None
    assert "pip install" in unusable["remedy"] and "/whl/cu124" in unusable["remedy"]
    assert doc["unknown"] == [unusable["detail"]]
    assert [g["worker"]["kind"] for g in doc["gpus"]] == ["torch-build", "torch-build"]
    # Level 2 tests one GPU at a time: the second is not started for the same answer.
    assert "GPU 0: import-torch" in done.stderr and "GPU 1: import-torch" not in done.stderr
    markdown = next((tmp_path / "r").glob("diag-*.md")).read_text()
    assert markdown.startswith("# gpu-audit diag level 2: UNKNOWN")
    assert f"- remedy: {unusable['remedy']}" in markdown
    terminal = subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--no-report"],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert terminal.returncode == 3 and terminal.stdout.startswith("DIAG UNKNOWN")
    assert "is a CPU-only build" in terminal.stdout and "fix: pip install" in terminal.stdout
    assert "diag-cuda-failed" not in terminal.stdout


def test_test_mode_still_runs_on_a_cpu_only_torch(fake_nvml, cli_env, tmp_path) -> None:
    _cpu_torch_only()
    env = fake_nvml(h100_node(1), base=cli_env)
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu",
                           "--json", "--no-report"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["torch_unusable"] is None and doc["gpus"][0]["worker"]["status"] == "done"


def test_the_worker_names_a_missing_torch(cli_env, tmp_path) -> None:
    # ``None`` in sys.modules makes ``import torch`` raise ModuleNotFoundError, as when it is
    # not installed.
    script = ("import sys; sys.modules['torch'] = None; from gpu_audit.diag.worker import main; "
              "sys.exit(main(['--device', 'cuda', '--plan', '{\"level\": 1}']))")
    done = subprocess.run([sys.executable, "-c", script], env=cli_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    fatal = events[-1]
    assert (fatal["ev"], fatal["kind"]) == ("fatal", "torch-missing")
    assert fatal["python"] == sys.executable and done.returncode == 3
