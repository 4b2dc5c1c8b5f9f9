"""Running gpu-audit in-process on generated input: the exit code and what it printed.

Every fuzz test asserts the same contract: a documented exit code, no traceback and no
"internal error" on any input, within a time bound.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass

from hypothesis import HealthCheck, settings

from gpu_audit.cli.app import main

# A fixed seed and a few hundred examples: the same inputs on every run, in bounded time.
FUZZ = settings(derandomize=True, max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
# The longest one generated input may take, however hostile (generous for a loaded runner).
PER_INPUT_S = 5.0


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


def run_cli(args: list[str], allowed: tuple[int, ...] = (0, 1, 2, 3)) -> Outcome:
    """``gpu-audit ARGS`` in this process; fails the test on a crash or an undocumented code."""
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    elapsed = time.monotonic() - started
    outcome = Outcome(code, out.getvalue(), err.getvalue())
    assert_clean(outcome, allowed)
    assert elapsed < PER_INPUT_S, f"gpu-audit {args[0]} took {elapsed:.1f} s"
    return outcome


def assert_clean(outcome: Outcome, allowed: tuple[int, ...] = (0, 1, 2, 3)) -> None:
    assert outcome.code in allowed, (outcome.code, outcome.stderr[-2000:])
    assert "internal error" not in outcome.stderr, outcome.stderr[-2000:]
    assert "Traceback" not in outcome.stderr, outcome.stderr[-2000:]


@contextlib.contextmanager
def timed(limit_s: float = PER_INPUT_S):
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    assert elapsed < limit_s, f"took {elapsed:.1f} s"
