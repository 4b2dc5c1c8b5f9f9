"""``gpu-audit check`` as a CI job runs it: a subprocess, its output, its files, its exit code."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from gpu_audit.model import Severity
from gpu_audit.report.jsonout import scan_document
from gpu_audit.rules import evaluate, exit_code
from tests import builders as b
from tests import fakegpu
from tests.conftest import cuda_available
from tests.fakegpu import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    broken_driver,
    gtx1650_laptop,
    h100_node,
    real_nvml_installed,
)
from tests.procs import current_user, install_program, running, uvicorn_argvs

# The fake NVML's fixtures (a compiled libnvidia-ml.so.1 loaded by the real pynvml).
fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

# Findings about the machine running the tests (its swap, its RAM) are not what a fake-GPU
# test is about; this policy leaves them out so the GPU checks decide the exit code.
HOST_NEUTRAL = 'ignore = ["swap-pressure", "low-host-memory"]\n'


def run_check(args: list[str], env: dict, cwd: Path, timeout: int = 120
              ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", "check", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def saved_scan(tmp_path: Path, scan, name: str = "scan.json") -> Path:
    findings = evaluate(scan)
    path = tmp_path / name
    path.write_text(json.dumps(scan_document(scan, findings, exit_code(findings, Severity.ERROR))))
    return path


def policy(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def checks_of(doc: dict) -> dict[str, list[dict]]:
    by_id: dict[str, list[dict]] = {}
    for item in doc["checks"]:
        by_id.setdefault(item["id"], []).append(item)
    return by_id


def status_of(doc: dict, check_id: str) -> str:
    (item,) = checks_of(doc)[check_id]
    return item["status"]


def held_by_ci() -> b.Scan:
    """An idle H100 except for one leftover training process of the CI user."""
    leftover = b.process(5151, 2048, ["python", "train.py"], user="ci")
    return b.scan(gpus=[b.gpu(0, used=2048 * MIB + 300 * MIB)], processes=[leftover])


MIB = b.MIB


# --- verdicts and exit codes ----------------------------------------------------------------


def test_duplicate_servers_make_the_runner_critical(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    result = run_check(["--from", str(saved), "--user", "alice", "--no-report"], cli_env,
                       tmp_path)
    assert result.returncode == 2, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("CHECK CRITICAL: duplicate-backends (pid:2101)")
    assert "| fail=1;;;0" in first
    assert "kill 2202 2303" in result.stdout
    assert "\x1b[" not in result.stdout
    assert "exit code 2 (CRITICAL)" in result.stdout


def test_fit_runner_exits_0(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    result = run_check(["--from", str(saved), "--user", "ci", "--no-report"], cli_env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("CHECK OK: ")


def test_a_leftover_process_warns_with_exit_1_and_fails_when_the_policy_says_so(cli_env,
                                                                                tmp_path):
    saved = saved_scan(tmp_path, held_by_ci())
    result = run_check(["--from", str(saved), "--user", "ci", "--no-report"], cli_env, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("CHECK WARNING: own-processes")
    strict = policy(tmp_path, 'own_processes = "fail"\n')
    result = run_check(["--from", str(saved), "--user", "ci", "--policy", str(strict),
                        "--no-report"], cli_env, tmp_path)
    assert result.returncode == 2


def test_fail_on_flag_moves_the_threshold_for_scan_findings(cli_env, tmp_path):
    scan = b.with_host(b.scan(), memory_available_bytes=4 * b.GIB)  # a warning finding
    saved = saved_scan(tmp_path, scan)
    base = ["--from", str(saved), "--user", "ci", "--no-report", "--json"]
    assert run_check(base, cli_env, tmp_path).returncode == 1
    strict = run_check([*base, "--fail-on", "warning"], cli_env, tmp_path)
    assert strict.returncode == 2
    assert status_of(json.loads(strict.stdout), "low-host-memory") == "fail"


# --- JSON ------------------------------------------------------------------------------------


def test_json_document_and_rejudging_a_saved_check(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    result = run_check(["--from", str(saved), "--user", "alice", "--json", "--no-report"],
                       cli_env, tmp_path)
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpu-audit.check/1"
    assert doc["generated_at"].endswith("Z") and doc["tool_version"]
    assert (doc["status"], doc["exit_code"], doc["hostname"]) == ("CRITICAL", 2, "node1")
    assert doc["user"] == "alice"
    assert doc["summary"]["fail"] == 1 and doc["summary"]["warn"] == 1
    assert doc["policy"]["min_gpus"] == 1 and doc["policy"]["source"] is None
    assert list(checks_of(doc))[:2] == ["nvidia-driver", "gpu-count"]
    for item in doc["checks"]:
        assert {"id", "subject", "status", "title", "summary", "evidence", "remedy",
                "finding_id", "duration_s"} <= item.keys()
        assert item["status"] in {"pass", "warn", "fail", "skip", "unknown"}
    (dup,) = [f for f in doc["findings"] if f["id"] == "duplicate-backend"]
    assert dup["check_status"] == "fail" and dup["severity"] == "warning"
    assert doc["snapshot"]["gpus"][0]["name"] == "NVIDIA GeForce GTX 1650"

    again_path = tmp_path / "check.json"
    again_path.write_text(result.stdout)
    relaxed = policy(tmp_path, 'duplicate_backends = "ignore"\nown_processes = "ignore"\n')
    again = run_check(["--from", str(again_path), "--policy", str(relaxed), "--json",
                       "--no-report"], cli_env, tmp_path)
    assert again.returncode == 0, again.stdout
    again_doc = json.loads(again.stdout)
    assert again_doc["user"] == "alice"  # recorded in the saved check document
    assert status_of(again_doc, "duplicate-backends") == "skip"


# --- CI outputs -------------------------------------------------------------------------------


def test_junit_report_is_read_back_by_a_junit_library(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    junit = tmp_path / "out" / "gpu-audit.xml"
    result = run_check(["--from", str(saved), "--user", "alice", "--junit", str(junit),
                        "--no-report"], cli_env, tmp_path)
    assert result.returncode == 2
    assert f"junit: {junit}" in result.stderr
    xml = JUnitXml.fromfile(str(junit))
    (suite,) = list(xml)
    cases = {(c.classname, c.name): c for c in suite}
    assert suite.tests == len(cases) and suite.failures == 1
    (failure,) = cases[("node1.process", "duplicate-backends")].result
    assert isinstance(failure, Failure) and "kill 2202 2303" in failure.text
    assert cases[("node1.gpu0", "free-vram")].is_passed
    assert not list(tmp_path.glob("out/.*.tmp"))  # written through a temporary file


def test_step_summary_is_appended_and_annotations_go_to_the_log(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    summary = tmp_path / "step_summary.md"
    summary.write_text("## Checkout\ndone\n")
    env = {**cli_env, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    result = run_check(["--from", str(saved), "--user", "alice", "--no-report", "--json"], env,
                       tmp_path)
    assert result.returncode == 2
    json.loads(result.stdout)  # stdout stays pure JSON
    text = summary.read_text()
    assert text.startswith("## Checkout\ndone\n## ❌ gpu-audit check: CRITICAL on `node1`")
    assert "| ❌ fail | `duplicate-backends` | pid:2101 |" in text
    commands = [line for line in result.stderr.splitlines() if line.startswith("::")]
    assert commands[0].startswith(
        "::error title=gpu-audit check on node1%3A duplicate-backends (pid%3A2101)::")
    assert commands[1].startswith("::warning title=gpu-audit check on node1%3A own-processes::")
    assert len(commands) == 2

    quiet = run_check(["--from", str(saved), "--user", "alice", "--no-report",
                       "--no-annotations"], env, tmp_path)
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("::")]
    outside = {k: v for k, v in cli_env.items()
               if k not in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")}
    plain = run_check(["--from", str(saved), "--user", "alice", "--no-report"], outside,
                      tmp_path)
    assert "::error" not in plain.stderr + plain.stdout


def test_report_and_json_twin_are_written(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    out = tmp_path / "reports-here"
    result = run_check(["--from", str(saved), "--user", "ci", "--out", str(out)], cli_env,
                       tmp_path)
    assert result.returncode == 0, result.stderr
    (md,) = out.glob("check-*-node1.md")
    (twin,) = out.glob("check-*-node1.json")
    assert md.stem == twin.stem
    assert md.read_text().startswith("## ✅ gpu-audit check: OK on `node1`")
    assert json.loads(twin.read_text())["schema"] == "gpu-audit.check/1"


# --- errors: UNKNOWN, never a traceback --------------------------------------------------------


def test_bad_policy_files_are_exit_3_naming_file_line_and_key(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    cases = {
        "typo.toml": ("min_gpus = 1\nmin_free_vram_pc = 50\n",
                      ["typo.toml:2:", "'min_free_vram_pc'", "did you mean 'min_free_vram_pct'"]),
        "type.toml": ('min_gpus = "two"\n', ["type.toml:1:", "'min_gpus' must be an integer"]),
        "syntax.toml": ("min_gpus = = 2\n", ["syntax.toml", "not valid TOML"]),
        "mode.toml": ('foreign_processes = "kill"\n', ["mode.toml:1:", "foreign_processes"]),
        "ignore.toml": ('ignore = ["swap-presure"]\n', ["ignore.toml:1:",
                                                        "did you mean 'swap-pressure'"]),
    }
    for name, (text, expected) in cases.items():
        path = policy(tmp_path, text, name)
        result = run_check(["--from", str(saved), "--policy", str(path), "--no-report"], cli_env,
                           tmp_path)
        assert result.returncode == 3, (name, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        for words in expected:
            assert words in result.stderr, (name, result.stderr)
        assert result.stdout == ""  # no verdict when the policy cannot be read


def test_policy_found_in_pyproject_is_used_and_its_errors_are_exit_3(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.gpu-audit.check]\nmin_gpus = 2\n")
    result = run_check(["--from", str(saved), "--user", "ci", "--no-report", "--json"], cli_env,
                       project)
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    assert doc["policy"]["source"].endswith("pyproject.toml")
    assert status_of(doc, "gpu-count") == "fail"
    (project / "pyproject.toml").write_text("[tool.gpu-audit.check]\nmin_gpu = 2\n")
    broken = run_check(["--from", str(saved), "--no-report"], cli_env, project)
    assert broken.returncode == 3
    assert "pyproject.toml:2: [tool.gpu-audit.check] unknown key 'min_gpu'" in broken.stderr


def test_unreadable_policy_file_is_exit_3(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    missing = run_check(["--from", str(saved), "--policy", str(tmp_path / "nope.toml"),
                         "--no-report"], cli_env, tmp_path)
    assert missing.returncode == 3 and "policy file not found" in missing.stderr
    folder = run_check(["--from", str(saved), "--policy", str(tmp_path), "--no-report"],
                       cli_env, tmp_path)
    assert folder.returncode == 3 and "not a file" in folder.stderr
    binary = policy(tmp_path, "", "binary.toml")
    binary.write_bytes(b"\xff\xfe\x00min_gpus")
    garbled = run_check(["--from", str(saved), "--policy", str(binary), "--no-report"], cli_env,
                        tmp_path)
    assert garbled.returncode == 3 and "binary.toml" in garbled.stderr
    if os.geteuid() != 0:  # root reads any file whatever its mode
        locked = policy(tmp_path, "min_gpus = 1\n", "locked.toml")
        locked.chmod(0)
        denied = run_check(["--from", str(saved), "--policy", str(locked), "--no-report"],
                           cli_env, tmp_path)
        assert denied.returncode == 3 and "cannot read" in denied.stderr


def test_bad_flags_and_inputs_are_exit_3(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    (tmp_path / "garbage.json").write_text("{not json")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = {
        "unknown stage 'full'": ["--stages", "imports,full"],
        "--from judges a saved document": ["--from", str(saved), "--stages", "imports"],
        "unknown severity 'fatal'": ["--from", str(saved), "--fail-on", "fatal"],
        "No such option": ["--frobnicate"],
        "no such file": ["--from", str(tmp_path / "missing.json")],
        "not JSON": ["--from", str(tmp_path / "garbage.json")],
        "--junit: cannot write": ["--from", str(saved), "--junit", str(a_file / "x.xml")],
    }
    for message, args in cases.items():
        result = run_check([*args, "--no-report"], cli_env, tmp_path)
        assert result.returncode == 3, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


# --- one policy: the environment, and check tables that set scan thresholds -----------------


def test_environment_overrides_the_policy_and_flags_override_the_environment(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.with_host(b.scan(), memory_available_bytes=4 * b.GIB))
    base = ["--from", str(saved), "--user", "ci", "--no-report", "--json"]
    env = {**cli_env, "GPU_AUDIT_MIN_GPUS": "2", "GPU_AUDIT_FAIL_ON": "warning"}
    doc = json.loads(run_check(base, env, tmp_path).stdout)
    assert status_of(doc, "gpu-count") == "fail" and status_of(doc, "low-host-memory") == "fail"
    assert doc["policy"]["source"] == "environment (GPU_AUDIT_FAIL_ON, GPU_AUDIT_MIN_GPUS)"
    flagged = json.loads(run_check([*base, "--fail-on", "critical"], env, tmp_path).stdout)
    assert status_of(flagged, "low-host-memory") == "warn"
    bad = run_check(base, {**cli_env, "GPU_AUDIT_OWN_PROCESSES": "kill"}, tmp_path)
    assert bad.returncode == 3 and bad.stdout == "" and "Traceback" not in bad.stderr
    assert "environment variable GPU_AUDIT_OWN_PROCESSES: key 'own_processes' must be one of" \
        in bad.stderr


def test_scan_thresholds_reach_check_and_a_check_table_still_overrides_them(cli_env, tmp_path):
    half_full = b.scan(gpus=[b.gpu(0, total=16 * b.GIB, used=7 * b.GIB)],
                           processes=[b.process(61, 7 * 1024, ["python", "a.py"], user="ci")])
    saved = saved_scan(tmp_path, half_full)  # 56% free
    base = ["--from", str(saved), "--user", "ci", "--no-report", "--json"]
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.gpu-audit]\nmin_free_vram_pct = 60\n")
    doc = json.loads(run_check(base, cli_env, project).stdout)
    assert status_of(doc, "free-vram") == "fail"
    (finding,) = [f for f in doc["findings"] if f["id"] == "low-free-vram"]
    assert finding["check_status"] == "fail"  # the scan's finding and the check agree
    (project / "pyproject.toml").write_text("[tool.gpu-audit]\nmin_free_vram_pct = 60\n\n"
                                            "[tool.gpu-audit.check]\nmin_free_vram_pct = 50\n")
    doc = json.loads(run_check(base, cli_env, project).stdout)
    assert status_of(doc, "free-vram") == "pass"
    assert not [f for f in doc["findings"] if f["id"] == "low-free-vram"]
    old_style = policy(tmp_path, "min_free_vram_pct = 70\nmax_swap_used_gib = 2\n", "old.toml")
    doc = json.loads(run_check([*base, "--policy", str(old_style)], cli_env, tmp_path).stdout)
    assert status_of(doc, "free-vram") == "fail" and doc["policy"]["min_free_vram_pct"] == 70


# --- live runs: no driver, and fake GPUs through the real pynvml ------------------------------


@pytest.mark.skipif(real_nvml_installed(), reason="a real NVIDIA driver library is installed")
def test_absent_driver_on_a_gpu_runner_is_critical(cli_env, tmp_path):
    cli_env["LD_LIBRARY_PATH"] = str(tmp_path)  # no libnvidia-ml.so.1 anywhere
    neutral = policy(tmp_path, HOST_NEUTRAL)
    result = run_check(["--policy", str(neutral), "--json", "--no-report"], cli_env, tmp_path)
    assert result.returncode == 2, result.stderr
    doc = json.loads(result.stdout)
    assert status_of(doc, "nvidia-driver") == "fail"
    assert status_of(doc, "gpu-count") == "fail"
    not_needed = policy(tmp_path, HOST_NEUTRAL + "min_gpus = 0\n", "cpu-runner.toml")
    cpu = run_check(["--policy", str(not_needed), "--json", "--no-report"], cli_env, tmp_path)
    cpu_doc = json.loads(cpu.stdout)
    assert status_of(cpu_doc, "nvidia-driver") == "skip"
    assert status_of(cpu_doc, "gpu-count") == "pass"
    assert cpu.returncode == cpu_doc["exit_code"] != 2


@pytest.mark.parametrize(("code", "words"), [
    (NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
    (NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version mismatch"),
])
def test_broken_driver_is_critical(fake_nvml, cli_env, tmp_path, code, words):
    env = fake_nvml(broken_driver(code), base=cli_env)
    neutral = policy(tmp_path, HOST_NEUTRAL)
    result = run_check(["--policy", str(neutral), "--json", "--no-report"], env, tmp_path)
    assert result.returncode == 2, result.stderr
    (driver,) = checks_of(json.loads(result.stdout))["nvidia-driver"]
    assert driver["status"] == "fail" and words in driver["summary"].lower()
    assert driver["remedy"]


def test_fit_h100_node_passes_every_gpu_check(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(8), base=cli_env)
    strict = policy(tmp_path, HOST_NEUTRAL + """\
min_gpus = 8
gpu_name = "H100"
min_gpu_memory_gib = 79
min_free_vram_pct = 95
max_gpu_temperature_c = 80
require_persistence_mode = true
min_driver_version = "550"
min_cuda_driver_version = "12.4"
""")
    junit = tmp_path / "gpu-audit.xml"
    result = run_check(["--policy", str(strict), "--json", "--junit", str(junit), "--no-report"],
                       env, tmp_path)
    doc = json.loads(result.stdout)
    by_id = checks_of(doc)
    for check_id in ("nvidia-driver", "gpu-count", "gpu-name", "gpu-memory", "free-vram",
                     "gpu-temperature", "persistence-mode", "duplicate-backends",
                     "foreign-processes", "own-processes"):
        assert {item["status"] for item in by_id[check_id]} == {"pass"}, by_id[check_id]
    assert len(by_id["gpu-name"]) == 8
    problems = [c for c in doc["checks"] if c["status"] not in ("pass", "skip")]
    assert problems == []
    assert result.returncode == doc["exit_code"] == 0
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    assert suite.failures == 0 and suite.errors == 0


def test_half_a_node_fails_the_gpu_count(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(4), base=cli_env)
    needs_eight = policy(tmp_path, HOST_NEUTRAL + "min_gpus = 8\n")
    result = run_check(["--policy", str(needs_eight), "--json", "--no-report"], env, tmp_path)
    assert result.returncode == 2
    (count,) = checks_of(json.loads(result.stdout))["gpu-count"]
    assert count["status"] == "fail" and count["evidence"]["gpus"] == 4


def test_laptop_with_three_uvicorn_copies(fake_nvml, cli_env, tmp_path):
    program = install_program(tmp_path / "bin", "uvicorn")
    with running(uvicorn_argvs(program, [8000, 8080, 3001])) as pids:
        env = fake_nvml(gtx1650_laptop(uvicorn_pids=pids), base=cli_env)
        neutral = policy(tmp_path, HOST_NEUTRAL)
        result = run_check(["--policy", str(neutral), "--json", "--no-report"], env, tmp_path)
    doc = json.loads(result.stdout)
    assert result.returncode == 2, doc["checks"]
    (dup,) = checks_of(doc)["duplicate-backends"]
    assert dup["status"] == "fail"
    assert sorted(m["pid"] for m in dup["evidence"]["members"]) == sorted(pids)
    # The copies get one remedy, from duplicate-backends: own-processes leaves them to it.
    (own,) = checks_of(doc)["own-processes"]
    assert own["status"] == "pass" and doc["user"] == current_user()
    assert own["evidence"]["processes"] == []
    assert own["evidence"]["duplicate_copies"] == sorted(pids)
    (free,) = checks_of(doc)["free-vram"]
    assert free["status"] == "pass" and free["evidence"]["memory_total_bytes"] == 4096 * MIB


# --- live stages: torch in a worker process -------------------------------------------------

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="the live stages import torch")


@pytest.mark.slow
@needs_torch
def test_live_stages_run_on_a_runner_that_needs_no_gpu(cli_env, tmp_path):
    cli_env["LD_LIBRARY_PATH"] = str(tmp_path)
    cpu = policy(tmp_path, HOST_NEUTRAL + "min_gpus = 0\n")
    out = tmp_path / "reports"
    result = run_check(["--policy", str(cpu), "--stages", "imports,smoke", "--json",
                        "--out", str(out)], cli_env, tmp_path, timeout=300)
    doc = json.loads(result.stdout)
    (imports,) = checks_of(doc)["stage-imports"]
    (smoke,) = checks_of(doc)["stage-smoke"]
    assert imports["status"] == "pass", imports
    assert smoke["status"] == "pass" and smoke["duration_s"] > 0
    assert smoke["evidence"]["cycles_done"] == 3
    assert [s["name"] for s in doc["stages"]] == ["imports", "smoke"]
    run_dir = Path(imports["evidence"]["run_dir"])
    assert run_dir.parent == out / "runs" and (run_dir / "state.json").exists()
    assert result.returncode == doc["exit_code"] == 0, doc["checks"]


@pytest.mark.slow
@needs_torch
def test_live_stages_fail_when_cuda_does_not_work(fake_nvml, cli_env, tmp_path):
    if cuda_available():
        pytest.skip("CUDA works on this machine")
    env = fake_nvml(h100_node(1), base=cli_env)  # NVML sees a GPU; torch cannot use it
    neutral = policy(tmp_path, HOST_NEUTRAL + "require_torch_cuda = true\n")
    result = run_check(["--policy", str(neutral), "--stages", "imports,smoke", "--json",
                        "--no-report"], env, tmp_path, timeout=300)
    assert result.returncode == 2, result.stderr
    by_id = checks_of(json.loads(result.stdout))
    (imports,) = by_id["stage-imports"]
    assert imports["status"] == "fail" and imports["evidence"]["failure"] == "cuda"
    assert imports["remedy"]
    assert by_id["stage-smoke"][0]["status"] == "skip"
    assert by_id["torch-cuda"][0]["status"] == "fail"


def test_a_check_that_cannot_judge_still_writes_the_junit_file(cli_env, tmp_path):
    """A broken policy is exit 3; the JUnit file says why, as one test case in error."""
    bad = policy(tmp_path, "min_gpuz = 1\n")
    junit = tmp_path / "gpu-audit.xml"
    result = run_check(["--policy", str(bad), "--junit", str(junit), "--no-report"], cli_env,
                       tmp_path)
    assert result.returncode == 3, result.stderr
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    (case,) = list(suite)
    (error,) = case.result
    assert suite.errors == 1 and "min_gpuz" in error.message and error.type == "UNKNOWN"


def test_live_stages_without_torch_still_write_the_junit_file(cli_env, tmp_path):
    """A runner without torch fails the imports stage, and CI gets its test report: the JUnit
    file is written, and the fix says to install torch, not to run validate again."""
    shadow = tmp_path / "no-torch" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\")\n")
    env = dict(cli_env, LD_LIBRARY_PATH=str(tmp_path),
               PYTHONPATH=f"{shadow.parent}{os.pathsep}{cli_env['PYTHONPATH']}")
    cpu = policy(tmp_path, HOST_NEUTRAL + "min_gpus = 0\n")
    junit = tmp_path / "stages.xml"
    result = run_check(["--policy", str(cpu), "--stages", "imports,smoke", "--junit", str(junit),
                        "--no-report"], env, tmp_path)
    assert result.returncode == 2, result.stderr
    cases = {case.name: case for suite in JUnitXml.fromfile(str(junit)) for case in suite}
    (failure,) = cases["stage-imports"].result
    assert isinstance(failure, Failure) and "torch is not installed" in failure.message
    assert cases["stage-smoke"].is_skipped
    text = result.stdout + result.stderr
    assert "validate again" not in text and "Traceback" not in text
    assert "--system-site-packages" in text


@pytest.mark.gpu
def test_live_stages_prove_cuda_works_on_a_real_gpu(cli_env, tmp_path):
    relaxed = policy(tmp_path, HOST_NEUTRAL + """\
require_torch_cuda = true
foreign_processes = "ignore"
own_processes = "ignore"
duplicate_backends = "ignore"
unattributed_vram = "ignore"
min_free_vram_pct = 0
""")
    result = run_check(["--policy", str(relaxed), "--stages", "imports,smoke", "--json",
                        "--no-report"], cli_env, tmp_path, timeout=600)
    by_id = checks_of(json.loads(result.stdout))
    (imports,) = by_id["stage-imports"]
    assert imports["status"] == "pass", imports
    assert imports["evidence"]["device"].startswith("cuda:")
    assert by_id["stage-smoke"][0]["status"] == "pass"
    assert by_id["torch-cuda"][0]["status"] == "pass"
    assert "round-tripped on cuda:" in by_id["torch-cuda"][0]["summary"]


def test_the_running_user_is_named_as_process_owners_are() -> None:
    import psutil

    from gpu_audit.cli.check import current_user

    assert current_user() == psutil.Process().username()
