"""Every signature costs time in proportion to the line it reads, whatever the line holds.

explain runs as root in Slurm epilogs on logs a job's user wrote, and the scanner hands a
signature up to a window of a few KiB around each candidate. A pattern that backtracks over that
window from every start (an unbounded lazy prefix, a greedy run of word characters before a
literal) costs the square of the window per line: a hostile log of such lines holds the epilog
for hours. So each signature runs on lines made from its own example (repeated, cut short,
without spaces, one word over and over) at two lengths, and its time may grow at most about as
the length does.
"""

from __future__ import annotations

import time

import pytest

from gpu_audit.explain.scanner import LOOKAHEAD, LOOKBEHIND
from gpu_audit.explain.signatures import SIGNATURES

LONG = LOOKBEHIND + LOOKAHEAD  # the widest window a signature is given
SHORT = LONG // 16
# Linear growth is 16 from SHORT to LONG; quadratic is 256. Below this many seconds a line costs
# too little to matter (and to time well).
GROWTH_LIMIT = 64.0
NEGLIGIBLE_S = 0.002


def hostile_lines(example: str, size: int) -> list[str]:
    words = example.split() or ["x"]
    half = example[: max(len(example) // 2, 1)]
    repeat = size // max(len(example), 1) + 1
    return [
        " ".join(words * repeat)[:size],
        (half * (size // len(half) + 1))[:size],
        ((example[:-1] + " ") * repeat)[:size],
        "a" * max(size - len(example), 0) + example[:-1],
        ((words[0] + " ") * (size // (len(words[0]) + 1) + 1))[:size],
        ((example.replace(" ", "") + " ") * repeat)[:size],
    ]


def cost(pattern, line: str, runs: int = 5) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        pattern.search(line)
        best = min(best, time.perf_counter() - started)
    return best


def growth(pattern, short: str, long: str) -> float:  # type: ignore[no-untyped-def]
    """How many times the long line costs the short one. A pause of the machine inflates one
    timing, not the best of many: a growth over the limit is timed again, alternating the two
    lines 25 times, before it counts. A quadratic pattern stays far over it (about 256)."""
    ratio = cost(pattern, long) / max(cost(pattern, short), 1e-6)
    if ratio < GROWTH_LIMIT:
        return ratio
    long_s = short_s = float("inf")
    for _ in range(25):
        long_s = min(long_s, cost(pattern, long, runs=1))
        short_s = min(short_s, cost(pattern, short, runs=1))
    return long_s / max(short_s, 1e-6)


@pytest.mark.parametrize("signature", SIGNATURES, ids=lambda sig: sig.id)
def test_a_signature_costs_time_in_proportion_to_the_line(signature) -> None:  # type: ignore[no-untyped-def]
    example = (signature.example or signature.id).strip().splitlines()[0]
    for short, long in zip(hostile_lines(example, SHORT), hostile_lines(example, LONG),
                           strict=True):
        long_s = cost(signature.regex, long)
        if long_s < NEGLIGIBLE_S:
            continue
        times = growth(signature.regex, short, long)
        assert times < GROWTH_LIMIT, (
            f"{signature.id}: {long_s * 1000:.1f} ms on {len(long)} characters, "
            f"{times:.1f} times its time on {len(short)}: {long[:80]!r}...")
