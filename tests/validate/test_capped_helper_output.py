"""A helper run's output (validate's imports check) is kept within a bound however much the
program prints: the head and the tail, and a line that says how much was left out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.validate.script.output import CHECK_OUTPUT_BYTES, HeadTail, run_capped
from tests.validate.runs import report_of, run_dir, run_validate, state_of

NOISY = ("import sys\n"
         "for _ in range(40):\n"
         "    sys.stdout.write('o' * (1 << 20)); sys.stderr.write('e' * (1 << 20))\n"
         "print('\\nLAST LINE')\n")


def test_forty_mib_on_each_stream_is_kept_within_the_bound() -> None:
    done = run_capped([sys.executable, "-c", NOISY], timeout=120)
    assert done.returncode == 0
    for text in (done.stdout, done.stderr):
        assert len(text) < CHECK_OUTPUT_BYTES + 200
        assert "bytes of output left out here]" in text
    assert done.stdout.rstrip().endswith("LAST LINE")  # the tail keeps how the run ended
    left_out = int(done.stdout.split("[gpu-audit: ")[1].split(" ")[0])
    assert left_out == 40 * (1 << 20) + len("\nLAST LINE\n") - CHECK_OUTPUT_BYTES


def test_short_output_is_kept_whole_and_a_timeout_kills() -> None:
    done = run_capped([sys.executable, "-c", "print('hi'); import sys; sys.exit(4)"],
                      timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (4, "hi\n", "")
    with pytest.raises(subprocess.TimeoutExpired):
        run_capped([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)


def test_head_tail_counts_what_fell_between() -> None:
    kept = HeadTail(limit=8)  # 6 bytes of head, 2 of tail
    for chunk in (b"abc", b"defgh", b"ij", b"k"):
        kept.feed(chunk)
    assert (bytes(kept.head), b"".join(kept.tail), kept.dropped) == (b"abcdef", b"jk", 3)


def test_a_module_that_prints_megabytes_at_import_passes_the_imports_stage(
        tmp_path: Path, cli_env: dict) -> None:
    package = tmp_path / "noisy"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import sys\nfor _ in range(24):\n    sys.stdout.write('x' * (1 << 20) + '\\n')\n")
    (package / "train.py").write_text("print('training')\n")
    env = cli_env | {"PYTHONPATH": f"{tmp_path}:{cli_env.get('PYTHONPATH', '')}"}
    out = tmp_path / "out"
    done = run_validate(["--device", "cpu", "--no-plots", "--progress", "plain", "--out",
                         str(out), "--run-id", "noisy", "--stage", "imports", "--",
                         sys.executable, "-m", "noisy.train"], env, timeout=300)
    run = run_dir(out, "noisy")
    assert state_of(run)["legs"]["default/imports"]["status"] == "passed", done.stderr[-2000:]
    assert report_of(run)
    log = (run / "logs" / "default.imports.log").read_text()
    assert "bytes of output left out here]" in log
    assert len(log) < 4 * CHECK_OUTPUT_BYTES
