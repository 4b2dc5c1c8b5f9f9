"""Which findings are the node's problems, and the one line a drain script or NHC reads.

A scheduler hook (prolog, epilog, health check) must drain a node only for what is wrong with
the node: a hardware or driver fault, or GPU memory a finished job left behind. A job's own
warnings (its environment, its allocator settings, another user's process it will share a GPU
with, a program's Xid 13) never drain. The line is
``gpu-audit: <finding id> on <gpu>: <numbers>``, for example
``gpu-audit: ecc-errors-increased on gpu:1: uncorrected_increase=3 corrected_increase=0``,
followed by ``see <path>`` only when a report was kept there. Which ids are the node's is
declared once, in the finding catalogue (``node_problem``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Finding, Severity
from gpu_audit.redact import redact_text

# Findings that describe the node itself (the catalogue's node_problem); at error or above they
# drain it.
NODE_PROBLEMS = catalogue.node_problems()
REASON_LIMIT = 200  # characters: Slurm shows the reason in `sinfo -R`; keep it one short line
ELLIPSIS = "..."  # ASCII: sinfo and syslog show it in any locale
_NUMBERS_SHOWN = 4
_WORDS = ("user", "cause")  # the strings a reason shows; other strings stay in the report
_SAFE = re.compile(r"[^A-Za-z0-9._@:/+-]")


def is_node_problem(finding: Finding) -> bool:
    """At error or above, of an id in :data:`NODE_PROBLEMS`; a new Xid only when its origin is
    the hardware or the driver (a program's Xid 13 or 43 is the job's)."""
    if finding.id not in NODE_PROBLEMS or (finding.severity or Severity.INFO) < Severity.ERROR:
        return False
    return not (finding.id == "xid-new" and finding.evidence.get("machine_fault") is False)


def node_problems(findings: Iterable[Finding]) -> list[Finding]:
    """The node's problems among ``findings``, worst first, each (id, subject) once."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in sorted(findings, key=lambda f: -(f.severity or Severity.INFO).rank):
        if is_node_problem(f) and (f.id, f.subject) not in seen:
            seen.add((f.id, f.subject))
            out.append(f)
    return out


def _value(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str) and value:
        return _SAFE.sub("_", redact_text(value))[:32]
    return None


def drain_reason(problems: list[Finding], report: str | None = None) -> str:
    """``gpu-audit: <id> on <gpu>: <numbers>`` for the worst problem (``(+N more)`` after it,
    then ``see <report>`` when a report was kept), on one line of at most
    :data:`REASON_LIMIT` characters made only of safe characters. A line too long loses whole
    words of its numbers (an ellipsis says so), never part of a number, the count or the path."""
    first = problems[0]
    gpu = first.evidence.get("gpu_index")
    where = f"gpu:{gpu}" if isinstance(gpu, int) and not isinstance(gpu, bool) else first.subject
    pairs = []
    for key, value in first.evidence.items():
        if isinstance(value, dict):  # {"79": 2}: xid-events' counts per code
            pairs += [(f"{key}_{k}", v) for k, v in value.items()]
        elif key != "gpu_index" and (key in _WORDS or not isinstance(value, str)):
            pairs.append((key, value))
    shown = [f"{_SAFE.sub('_', key)}={text}" for key, value in pairs
             if (text := _value(value)) is not None][:_NUMBERS_SHOWN]
    head = f"gpu-audit: {first.id} on {_SAFE.sub('_', where)}"
    tail = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    if report:
        tail += f"; see {_SAFE.sub('_', report)}"
    return _fit(head, shown, tail)


def _fit(head: str, words: list[str], tail: str) -> str:
    """``head: words tail`` within :data:`REASON_LIMIT`: whole words dropped from the end (an
    ellipsis marks the cut); the head alone is cut only when nothing else fits."""
    room = REASON_LIMIT - len(tail)
    kept = list(words)
    while kept and len(f"{head}: {' '.join(kept)} {ELLIPSIS}") > room:
        kept.pop()
    if kept == words:
        line = f"{head}: {' '.join(words)}" if words else head
    elif kept:
        line = f"{head}: {' '.join(kept)} {ELLIPSIS}"
    else:
        line = f"{head} {ELLIPSIS}" if words else head
    if len(line) > room:
        line = line[:max(room - len(ELLIPSIS), 0)].rsplit(" ", 1)[0] + ELLIPSIS
    return (line + tail)[:REASON_LIMIT]
