"""``unreleased_vram_min_gib`` (diff and the Slurm epilog), ``slurm_hook_deadline_s`` and
``slurm_settle_s`` (``check --slurm``): policy keys with the usual precedence and checks, and
the commands use them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit.config import CheckPolicy, Policy, load_check_policy, load_policy
from gpu_audit.diff import compare
from gpu_audit.errors import ConfigError
from gpu_audit.model import Severity
from gpu_audit.report.jsonout import scan_document
from gpu_audit.rules import evaluate, exit_code
from tests import builders as b
from tests import fakegpu
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml
GIB, MIB = b.GIB, b.MIB


def test_defaults_are_the_former_constants():
    assert Policy().unreleased_vram_min_bytes == GIB
    policy = CheckPolicy()
    assert policy.slurm_hook_deadline_s == 30.0 and policy.slurm_settle_s == 3.0


def test_precedence_variable_over_file_over_default(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.gpu-audit]\nunreleased_vram_min_gib = 4\n\n"
        "[tool.gpu-audit.check]\nslurm_hook_deadline_s = 60\nslurm_settle_s = 5\n")
    path = tmp_path / "pyproject.toml"
    assert load_policy(path, environ={}).unreleased_vram_min_gib == 4.0
    policy = load_check_policy(search_from=tmp_path, environ={})
    assert (policy.unreleased_vram_min_gib, policy.slurm_hook_deadline_s,
            policy.slurm_settle_s) == (4.0, 60.0, 5.0)
    policy = load_check_policy(search_from=tmp_path, environ={
        "GPU_AUDIT_UNRELEASED_VRAM_MIN_GIB": "0.5", "GPU_AUDIT_SLURM_HOOK_DEADLINE_S": "90",
        "GPU_AUDIT_SLURM_SETTLE_S": "0"})
    assert (policy.unreleased_vram_min_gib, policy.slurm_hook_deadline_s,
            policy.slurm_settle_s) == (0.5, 90.0, 0.0)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("unreleased_vram_min_gib", "0", "must be above 0 and at most 1e+12 (GiB), got 0"),
    ("unreleased_vram_min_gib", "-1", "must not be negative"),
    ("unreleased_vram_min_gib", "nan", "must be a number"),
    ("slurm_hook_deadline_s", "0", "must be above 0 and at most 3600 (seconds)"),
    ("slurm_hook_deadline_s", "7200", "must be above 0 and at most 3600 (seconds), got 7200"),
    ("slurm_hook_deadline_s", "inf", "must be a number"),
    ("slurm_settle_s", "301", "must be at least 0 and at most 300 (seconds)"),
    ("slurm_settle_s", "30", "slurm_settle_s (30 s) must be below slurm_hook_deadline_s (30 s)"),
])
def test_bad_values_are_one_line_config_errors_naming_the_variable(key, value, message):
    name = f"GPU_AUDIT_{key.upper()}"
    with pytest.raises(ConfigError) as caught:
        load_check_policy(environ={name: value})
    assert message in str(caught.value) and name in str(caught.value)
    assert "\n" not in str(caught.value)


def test_bad_values_in_a_file_name_the_file_line_and_key(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text("# diff\nunreleased_vram_min_gib = inf\n")
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:2: key 'unreleased_vram_min_gib' "
                                          r"must be a finite number"):
        load_policy(path, environ={})
    path.write_text("[check]\nslurm_hook_deadline_s = 2\nslurm_settle_s = 2.5\n")
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:3: \[check\] slurm_settle_s \(2.5 s\) "
                                          r"must be below slurm_hook_deadline_s \(2 s\)"):
        load_check_policy(path, environ={})
    path.write_text("slurm_settle_s = 1\n")  # a check key in the scan's table
    with pytest.raises(ConfigError, match=r"read by `gpu-audit check` only"):
        load_policy(path, environ={})


def test_diff_reports_unreleased_memory_from_the_policys_threshold():
    before = b.scan(gpus=[b.gpu(0)])
    after = b.scan(gpus=[b.gpu(0, used=300 * MIB + 600 * MIB)],
                   generated_at="2026-11-22T11:00:00Z")
    assert compare(before, after).findings == []  # 600 MiB: below the default 1 GiB
    (found,) = compare(before, after, policy=Policy(unreleased_vram_min_gib=0.5)).findings
    assert found.id == "vram-unreleased" and found.evidence["unreleased_mib"] == 600
    after = b.scan(gpus=[b.gpu(0, used=300 * MIB + 3 * GIB)], generated_at="2026-11-22T11:00:00Z")
    assert compare(before, after, policy=Policy(unreleased_vram_min_gib=4)).findings == []


# ------------------------------------------------------------------ the commands, for real


def run(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gpu_audit", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    done.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    assert "Traceback" not in done.stderr, done.stderr
    return done


def saved_scan(path: Path, hour: int, used: int) -> Path:
    scan = b.scan(gpus=[b.gpu(0, pci_bus_id="00000000:18:00.0", used=used)],
                  generated_at=f"2026-11-22T{hour:02d}:00:00Z")
    findings = evaluate(scan)
    path.write_text(json.dumps(scan_document(scan, findings,
                                             exit_code(findings, Severity.ERROR))))
    return path


@pytest.fixture
def slurm_env(cli_env):
    env = {k: v for k, v in cli_env.items() if not k.startswith("SLURM_")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return {**env, "SLURM_JOB_ID": "4711", "SLURM_JOB_GPUS": "0", "SLURM_JOB_USER": "nobody"}


def test_diff_command_reads_the_threshold_and_refuses_a_bad_one(tmp_path, cli_env):
    before = saved_scan(tmp_path / "before.json", 10, 300 * MIB)
    after = saved_scan(tmp_path / "after.json", 11, 300 * MIB + 600 * MIB)
    args = ("diff", str(before), str(after), "--json", "--no-report")
    default = run(cli_env, tmp_path, *args)
    assert default.returncode == 1  # only the scan's new unattributed-vram warning
    assert json.loads(default.stdout)["findings"] == []
    low = run({**cli_env, "GPU_AUDIT_UNRELEASED_VRAM_MIN_GIB": "0.5"}, tmp_path, *args)
    assert low.returncode == 2
    assert [f["id"] for f in json.loads(low.stdout)["findings"]] == ["vram-unreleased"]
    bad = run({**cli_env, "GPU_AUDIT_UNRELEASED_VRAM_MIN_GIB": "0"}, tmp_path, *args)
    assert bad.returncode == 3 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert "GPU_AUDIT_UNRELEASED_VRAM_MIN_GIB" in bad.stderr
    # the flag outranks the variable
    flag = run({**cli_env, "GPU_AUDIT_UNRELEASED_VRAM_MIN_GIB": "4"}, tmp_path, *args,
               "--unreleased-min-gib", "0.5")
    assert flag.returncode == 2 and "vram-unreleased" in flag.stdout
    bad_flag = run(cli_env, tmp_path, *args, "--unreleased-min-gib", "0")
    assert bad_flag.returncode == 3 and bad_flag.stderr.startswith(
        "gpu-audit: --unreleased-min-gib: key 'unreleased_vram_min_gib' must be above 0")
    assert len(bad_flag.stderr.strip().splitlines()) == 1


def test_epilog_uses_the_threshold_and_the_settle_time(tmp_path, slurm_env):
    spool = ("--spool", str(tmp_path / "spool"))
    before = saved_scan(tmp_path / "before.json", 10, 300 * MIB)
    after = saved_scan(tmp_path / "after.json", 11, 300 * MIB + 2 * GIB)

    def epilog(**variables: str):
        prolog = run(slurm_env, tmp_path, "check", "--slurm", "prolog", *spool,
                     "--from", str(before))
        assert prolog.returncode == 0, prolog.stdout + prolog.stderr
        return run({**slurm_env, **variables}, tmp_path, "check", "--slurm", "epilog", *spool,
                   "--from", str(after))

    quick = epilog(GPU_AUDIT_SLURM_SETTLE_S="0")
    assert quick.returncode == 2 and quick.stdout.startswith("gpu-audit: vram-unreleased on gpu:0")
    settled = epilog(GPU_AUDIT_SLURM_SETTLE_S="2.5")
    assert settled.returncode == 2 and settled.elapsed >= 2.5 > quick.elapsed - 0.5
    tolerant = epilog(GPU_AUDIT_UNRELEASED_VRAM_MIN_GIB="3", GPU_AUDIT_SLURM_SETTLE_S="0")
    assert tolerant.returncode == 0 and tolerant.stdout.startswith("gpu-audit: OK: epilog")


def test_a_hook_answers_within_the_policys_deadline(fake_nvml, tmp_path, slurm_env):
    scenario = h100_node(4)
    scenario["call_delay_ms"] = 300  # each GPU takes seconds to read
    env = fake_nvml(scenario, base=slurm_env)
    done = run({**env, "GPU_AUDIT_SLURM_HOOK_DEADLINE_S": "1", "GPU_AUDIT_SLURM_SETTLE_S": "0"},
               tmp_path, "check", "--slurm", "healthcheck", "--timeout", "20")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "gave no verdict within 1 s" in done.stdout + done.stderr
    bad = run({**env, "GPU_AUDIT_SLURM_HOOK_DEADLINE_S": "0"}, tmp_path, "check", "--slurm",
              "healthcheck")
    assert bad.returncode == 3 and "slurm_hook_deadline_s" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
