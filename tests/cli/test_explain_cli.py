"""``gpu-audit explain`` as a user runs it after a job died: output, JSON and exit codes."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

from gpu_audit.explain import CLASSES
from tests.explain.helpers import FIXTURES

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def explain(args: list[str], env: dict, stdin: bytes | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", "explain", *args], env=env,
                          input=stdin, capture_output=True, timeout=120, cwd=cwd)


def test_fragmented_oom_is_explained_with_numbers_and_the_variable_to_set(cli_env) -> None:
    done = explain([str(FIXTURES / "a100_fragmented_oom_torch23.log"),
                    "--torch-version", "2.4.1+cu124"], cli_env)
    out = done.stdout.decode()
    assert done.returncode == 1, done.stderr
    assert "ROOT CAUSE" in out and "CUDA out of memory: fragmentation" in out
    assert "line 12" in out
    assert "reserved unallocated 18.02 GiB" in out
    assert "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'" in out
    assert "\x1b[" not in out  # NO_COLOR and not a terminal: plain text
    assert done.stderr == b""


def test_json_document(cli_env) -> None:
    done = explain([str(FIXTURES / "ddp8_rank3_illegal_access_nccl_timeouts.log"), "--json"],
                   cli_env)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpu-audit.explain/1"
    assert re.match(r"^\d+\.\d+", doc["tool_version"])
    assert ISO_UTC.match(doc["generated_at"])
    assert doc["gpu_failure"] is True and doc["root_cause_class"] == "illegal-memory-access"
    (source,) = doc["inputs"]
    assert source["lines"] == 14 and source["compression"] is None
    assert source["bytes"] == (FIXTURES / "ddp8_rank3_illegal_access_nccl_timeouts.log"
                               ).stat().st_size
    classes = [i["class"] for i in doc["incidents"]]
    assert classes == ["illegal-memory-access", "nccl", "nccl"]
    assert set(classes) <= set(CLASSES)
    first = doc["incidents"][0]
    for key in ("class", "signature", "title", "severity", "role", "line_numbers", "locations",
                "excerpt", "numbers", "count", "ranks", "explanation", "remedy"):
        assert key in first, key
    assert first["line_numbers"] == [10] and first["role"] == "root-cause"
    timeout = doc["incidents"][1]["numbers"]
    assert timeout["timeout_ms"] == 600000 and timeout["seq_num"] == 48213


def test_json_sizes_are_integers_and_unknowns_null(cli_env) -> None:
    done = explain([str(FIXTURES / "gtx1650_oom_too_big_torch113.log"), "--json"], cli_env)
    numbers = json.loads(done.stdout)["incidents"][0]["numbers"]
    for key, value in numbers.items():
        if key.endswith("_bytes"):
            assert value is None or isinstance(value, int), key
    assert numbers["other_processes"] is None and numbers["private_pool_bytes"] is None


def test_clean_log_exits_0(cli_env) -> None:
    done = explain([str(FIXTURES / "healthy_run_with_alarming_lines.log")], cli_env)
    assert done.returncode == 0
    assert "No known GPU failure signature found" in done.stdout.decode()
    doc = json.loads(explain([str(FIXTURES / "healthy_run_with_alarming_lines.log"), "--json"],
                             cli_env).stdout)
    assert doc["incidents"] == [] and doc["gpu_failure"] is False


def test_a_warning_alone_is_no_gpu_failure_unless_asked(cli_env) -> None:
    log = str(FIXTURES / "torch29_deprecated_alloc_conf_healthy.log")
    assert explain([log], cli_env).returncode == 0
    assert explain([log, "--fail-on", "warning"], cli_env).returncode == 1


def test_stdin_and_gzip(tmp_path: Path, cli_env) -> None:
    data = (FIXTURES / "dmesg_xid79_fallen_off_bus.log").read_bytes()
    done = explain(["-"], cli_env, stdin=data)
    assert done.returncode == 1 and b"Xid 79: GPU has fallen off the bus" in done.stdout
    packed = tmp_path / "kern.log.gz"
    packed.write_bytes(gzip.compress(data))
    doc = json.loads(explain([str(packed), "--json"], cli_env).stdout)
    assert doc["inputs"][0]["compression"] == "gzip"
    assert doc["incidents"][0]["numbers"]["xid"] == 79


def test_several_logs_give_the_cause_across_ranks(tmp_path: Path, cli_env) -> None:
    (tmp_path / "rank0.log").write_text(
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800012 "
        "milliseconds before timing out.\n")
    (tmp_path / "rank1.log").write_text(
        "Traceback (most recent call last):\nRuntimeError: CUDA error: device-side assert "
        "triggered\n")
    done = explain(["rank0.log", "rank1.log"], cli_env, cwd=tmp_path)
    out = done.stdout.decode()
    assert done.returncode == 1
    assert out.index("device-side assertion") < out.index("NCCL ALLREDUCE timed out")
    assert "rank1.log:2" in out and "rank0.log:1" in out


def test_unreadable_inputs_exit_3_with_one_clear_line(tmp_path: Path, cli_env) -> None:
    missing = explain([str(tmp_path / "train.log")], cli_env)
    assert missing.returncode == 3
    assert missing.stderr.decode().strip() == f"gpu-audit: {tmp_path / 'train.log'}: no such file"
    corrupt = tmp_path / "train.log.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage that is not deflate data")
    done = explain([str(corrupt)], cli_env)
    err = done.stderr.decode()
    assert done.returncode == 3 and "Traceback" not in err
    assert "corrupt or truncated" in err and len(err.strip().splitlines()) == 1


def test_usage_errors_exit_3(cli_env) -> None:
    bad = explain([str(FIXTURES / "k8s_pod_oomkilled.log"), "--fail-on", "fatal"], cli_env)
    assert bad.returncode == 3 and b"--fail-on" in bad.stderr
    assert explain([], cli_env).returncode == 3
    twice = explain(["-", "-"], cli_env, stdin=b"")
    assert twice.returncode == 3 and b"only once" in twice.stderr


def test_brackets_in_log_lines_are_printed_verbatim(cli_env) -> None:
    done = explain(["-"], cli_env, stdin=b"[rank7]:[red]bold[/red] RuntimeError: CUDA error: "
                   b"misaligned address\n")
    assert b"[rank7]:[red]bold[/red] RuntimeError" in done.stdout


def test_ptx_from_a_newer_toolkit_says_why_and_what_to_do(cli_env) -> None:
    done = explain(["-"], cli_env, stdin=b"RuntimeError: CUDA error: the provided PTX was "
                   b"compiled with an unsupported toolchain.\n")
    out = done.stdout.decode()
    assert done.returncode == 1, done.stderr
    assert "driver-mismatch" in out
    why = re.search(r"^\s*Why: (.*?)\n\s*Fix: ", out, re.M | re.S)
    assert why and "newer CUDA toolkit than the installed NVIDIA driver" in " ".join(
        why[1].split())
    fix = out.split("Fix: ", 1)[1].split("\n\n")[0]
    remedy = " ".join(fix.split())
    assert "nvidia-smi" in remedy and "update the NVIDIA driver" in remedy


def test_a_readable_log_is_explained_even_when_another_cannot_be_read(tmp_path: Path,
                                                                     cli_env) -> None:
    good = FIXTURES / "a100_fragmented_oom_torch23.log"
    missing = tmp_path / "missing.log"
    done = explain([str(good), str(missing), "--torch-version", "2.4.1+cu124"], cli_env)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 3
    assert "CUDA out of memory: fragmentation" in out
    assert f"{missing}: no such file" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_line_count_is_worded_for_one_line(tmp_path: Path, cli_env) -> None:
    one = tmp_path / "one.log"
    one.write_text("all good\n")
    out = explain([str(one)], cli_env).stdout.decode()
    assert "(1 line," in out and "(1 lines" not in out
