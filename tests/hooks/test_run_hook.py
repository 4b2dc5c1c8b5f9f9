"""The hook runner without a subprocess: its deadline, and the epilog's second look."""

from __future__ import annotations

import time

import pytest

from gpu_audit.config import Policy
from gpu_audit.hooks.slurm import HookTimeout, run_hook
from tests import builders as b

JOB = {"SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "0", "SLURM_JOB_USER": "alice"}


def test_a_hook_that_hangs_answers_at_its_deadline(tmp_path):
    def stuck():
        time.sleep(30)

    started = time.monotonic()
    with pytest.raises(HookTimeout, match=r"the healthcheck gave no verdict within 0\.3 s") as got:
        run_hook("healthcheck", policy=Policy(), environ={}, spool=tmp_path / "s",
                 collect=stuck, deadline_s=0.3)
    assert got.value.exit_code == 3 and time.monotonic() - started < 5


def test_the_epilog_looks_again_before_it_calls_memory_leaked(tmp_path):
    lines: list[str] = []
    clean = b.scan()
    assert run_hook("prolog", policy=Policy(), environ=JOB, spool=tmp_path / "s",
                    collect=lambda: clean, emit=lines.append) == 0
    leaky = b.scan(processes=[b.process(77, 4096, user="alice")],
                   gpus=[b.gpu(0, used=4396 * b.MIB)], generated_at="2026-11-22T11:00:00Z")
    released = b.scan(generated_at="2026-11-22T11:00:05Z")
    scans = iter([leaky, released])
    assert run_hook("epilog", policy=Policy(), environ=JOB, spool=tmp_path / "s",
                    collect=lambda: next(scans), settle_s=0.01, emit=lines.append) == 0
    assert lines[-1].startswith("gpu-audit: OK: epilog")

    # Still there on the second look: drained.
    assert run_hook("prolog", policy=Policy(), environ=JOB, spool=tmp_path / "s",
                    collect=lambda: clean, emit=lines.append) == 0
    assert run_hook("epilog", policy=Policy(), environ=JOB, spool=tmp_path / "s",
                    collect=lambda: leaky, settle_s=0.01, emit=lines.append) == 2
    assert lines[-1] == ("gpu-audit: job-vram-leak on gpu:0: pid=77 user=alice used_memory_mib=4096"
                         f"; see {tmp_path}/s/epilog-5.json")


def test_an_unknown_hook_is_refused(tmp_path):
    with pytest.raises(Exception, match="expected one of prolog, epilog, healthcheck"):
        run_hook("teardown", policy=Policy(), environ=JOB, spool=tmp_path, collect=b.scan)
