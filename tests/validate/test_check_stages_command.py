"""``gpu-audit check --stages imports,smoke`` with a configured ``command``
(``[validate] command = [...]``): the user's own script is the workload, run for real on the
CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.validate.script.launch import command_script, missing_in_command
from tests.validate.runs import REPO

PY = sys.executable
SEED_LIKE = str(REPO / "tests" / "validate" / "scripts" / "seed_like.py")
FAILING = """\
import sys
for i in range(2):
    print(f"cycle {i}", flush=True)
raise RuntimeError("the loss became NaN at step 2")
"""


def configure(folder: Path, command: list[str] | str) -> Path:
    text = command if isinstance(command, str) else json.dumps(command)
    path = folder / "gpu-audit.toml"
    path.write_text("[check]\nmin_gpus = 0\n\n[validate]\ndevice = \"cpu\"\n"
                    f"command = {text}\ncycle_pattern = '^cycle'\n")
    return path


def check(folder: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess,
                                                                  dict | None]:
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--stages",
                           "imports,smoke", "--json", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=180)
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(done.stdout) if done.stdout.strip() else None


def stage(document: dict, name: str) -> dict:
    return next(c for c in document["checks"] if c["id"] == f"stage-{name}")


def test_the_configured_script_runs_as_the_stages_workload(tmp_path, cli_env):
    configure(tmp_path, [PY, SEED_LIKE, "--cycles", "{cycles}", "{quantum}"])
    done, doc = check(tmp_path, cli_env, "--out", str(tmp_path / "reports"))
    assert done.returncode == 0, done.stdout + done.stderr
    imports, smoke = stage(doc, "imports"), stage(doc, "smoke")
    assert imports["status"] == "pass"
    assert imports["summary"] == f"torch imports in the command's Python ({PY}); the stages " \
                                 "run on cpu"
    assert smoke["status"] == "pass" and smoke["summary"].startswith("3/3 cycles on cpu")
    log = Path(smoke["evidence"]["log"])
    assert "cycle 2 loss=" in log.read_text()  # the script itself ran: its own output
    assert "quantum mode: lite" in log.read_text()  # {quantum} followed the smoke stage


def test_a_program_that_is_not_python_is_found_and_torch_is_not_claimed(tmp_path, cli_env):
    # Ten lines at once: those printed before gpu-audit's SIGTERM lands are past the stage.
    configure(tmp_path, ["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo cycle $i; "
                                          "done"])
    done, doc = check(tmp_path, cli_env, "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = stage(doc, "imports")["summary"]
    assert summary.startswith("the command's program /bin/sh was found") and "torch not" in summary
    smoke = stage(doc, "smoke")
    assert smoke["summary"].startswith("3/3 cycles on cpu"), smoke


def test_a_failing_script_fails_check_with_its_stage_and_reason(tmp_path, cli_env):
    (tmp_path / "train.py").write_text(FAILING)
    configure(tmp_path, [PY, "train.py"])
    done, doc = check(tmp_path, cli_env, "--no-report")
    assert done.returncode == 2, done.stdout + done.stderr
    assert doc["status"] == "CRITICAL" and doc["exit_code"] == 2
    assert stage(doc, "imports")["status"] == "pass"
    smoke = stage(doc, "smoke")
    assert smoke["status"] == "fail"
    assert smoke["summary"] == ("error: the command exited with code 1 after 2 cycles: "
                                "RuntimeError: the loss became NaN at step 2")
    evidence = smoke["evidence"]
    assert evidence["cycles_done"] == 2 and evidence["cycles_planned"] == 3
    assert "RuntimeError: the loss became NaN at step 2" in evidence["log_tail"]
    assert smoke["remedy"]


def test_the_terminal_checklist_names_the_failed_stage(tmp_path, cli_env):
    (tmp_path / "train.py").write_text(FAILING)
    configure(tmp_path, [PY, "train.py"])
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--stages", "smoke",
                           "--no-report"], cwd=tmp_path, env=cli_env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 2, done.stdout + done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("FAIL "))
    assert "stage-smoke" in line and "exited with code 1" in line


@pytest.mark.parametrize(("command", "message"), [
    (["no-such-program-4711", "train.py"],
     "its program 'no-such-program-4711' was not found (not on PATH, or not executable)"),
    ([PY, "-u", "missing_train.py", "--steps", "{cycles}"],
     "the script 'missing_train.py' it runs was not found"),
    ("[]", "key 'command' is empty"),
])
def test_a_missing_program_or_script_is_a_config_error_before_anything_runs(
        tmp_path, cli_env, command, message):
    config = configure(tmp_path, command)
    done, doc = check(tmp_path, cli_env, "--out", str(tmp_path / "reports"))
    assert done.returncode == 3 and doc is None
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"gpu-audit: {config}:6: key 'command'") and message in line
    assert not (tmp_path / "reports" / "runs").exists()  # no stage was started


def test_which_script_a_command_runs():
    assert command_script([PY, "-u", "-X", "dev", "train.py", "x.py"], PY) == "train.py"
    assert command_script([PY, "-m", "pkg.train"], PY) is None
    assert command_script([PY, "-c", "print(1)"], PY) is None
    assert command_script(["torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"],
                          "/usr/bin/torchrun") == "train.py"
    assert command_script(["./run.sh", "--steps", "3"], "./run.sh") is None


def test_missing_in_command_leaves_placeholders_alone(tmp_path):
    env = {"PATH": str(Path(PY).parent)}
    assert missing_in_command([PY, "{run_dir}/train.py"], env, str(tmp_path)) is None
    assert missing_in_command(["{stage}"], env, str(tmp_path)) is None
    (tmp_path / "train.py").write_text("")
    assert missing_in_command([Path(PY).name, "train.py"], env, str(tmp_path)) is None
    assert "not found" in missing_in_command([PY, "other.py"], env, str(tmp_path))
