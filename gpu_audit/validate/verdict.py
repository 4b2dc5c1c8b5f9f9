"""How a stage ended: the runner's verdict on one worker, from what it saw and the cycle log.

Pure judging over data the runner gathered (:class:`WorkerRun`, the stage's cycle records, the
tail of its log): interrupted, hung (and where), died (and of what), failed (and why, with what
``gpu-audit explain`` makes of the log), a gate failed, or passed.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.knowledge.oom import oom_kind_of_text, oom_numbers
from gpu_audit.redact import redact_text
from gpu_audit.validate.command_error import read_error
from gpu_audit.validate.findings import leg_gates
from gpu_audit.validate.plan import Plan, split_leg
from gpu_audit.validate.script.stacks import describe, library_frame
from gpu_audit.validate.state import LegState, completed_cycles, cycles_reached

_DEATH_SIGNALS = {
    "SIGKILL": " (the kernel's out-of-memory killer sends this when host memory runs out; check "
               "`dmesg` or `journalctl -k` for 'Killed process')",
    "SIGSEGV": " (a crash in native code: a CUDA library, a driver, or an extension)",
    "SIGABRT": " (an abort in native code, often a failed CUDA or NCCL assertion)",
    "SIGBUS": " (a bus error: often shared memory (/dev/shm) too small for data-loader "
              "workers)",
}


@dataclass
class WorkerRun:
    """What one worker process did, as the runner saw it."""

    done: dict[str, Any] | None = None
    ready: dict[str, Any] | None = None
    returncode: int | None = None
    hung: bool = False
    hang_limit_s: float | None = None
    slowest_cycle_s: float | None = None
    hung_cycle: int | None = None
    stopped_by_user: bool = False
    killed_by_user: bool = False
    cycle_times: list[float] = field(default_factory=list)
    stop_asked_at: float = float("inf")  # a hung command's supervisor was asked to stop
    stacks: list[dict[str, Any]] = field(default_factory=list)  # its processes' waiting lines


def judge(plan: Plan, key: str, leg: LegState, outcome: WorkerRun,
          records: list[dict[str, Any]], tail: str) -> None:
    """Set ``leg``'s status, reason and failure from the worker's run and the stage's records."""
    stage = plan.stage(split_leg(key)[1])
    done_records = completed_cycles(records)
    leg.cycles_done = cycles_reached(done_records)
    done = outcome.done or {}
    leg.stderr_tail = tail or None
    if done.get("warnings"):
        leg.ready.setdefault("warnings", [])
        for warning in done["warnings"]:
            if warning not in leg.ready["warnings"]:
                leg.ready["warnings"].append(warning)
    if done.get("ended_processes"):
        leg.ready["ended_processes"] = done["ended_processes"]

    if outcome.stopped_by_user and (done.get("status") == "interrupted"
                                    or outcome.killed_by_user or not done):
        leg.status, leg.reason = "interrupted", "interrupted by the user; resume with --resume"
        return
    if outcome.hung:
        # A command's stack is its own (its Pythons dump it through the hook), one per process.
        ranks = [{k: redact_text(v) if isinstance(v, str) else v for k, v in entry.items()}
                 for entry in outcome.stacks] if plan.script is not None else []
        where = stage_location(tail) if plan.script is None else (
            describe(ranks[0]) if ranks else script_location(tail))
        cycle = leg.cycles_done
        slowest = outcome.slowest_cycle_s
        basis = (f"{plan.hang_factor:g} x the slowest cycle so far ({slowest:.3g} s), "
                 f"bounded to {plan.hang_min_s:g}-{plan.hang_max_s:g} s"
                 + ("; the first cycle, which includes the start-up, does not count"
                    if plan.script is not None else "")
                 if slowest is not None else "the start-up limit")
        what = ("the worker was stopped" if plan.script is None else
                "the command printed nothing in that time either; it was stopped")
        others = "".join(f"; {describe(entry)}" for entry in ranks[1:4] if entry.get("own"))
        fail(leg, "hang", f"cycle {cycle} did not finish within {outcome.hang_limit_s:.3g} s "
             f"({basis}); {what}" + (f"; it was at {where}" if where else "") + others,
             {"cycle": cycle, "limit_s": outcome.hang_limit_s, "where": where,
              **({"processes": ranks} if ranks else {})})
        return
    if not done:
        where = stage_location(tail)
        fail(leg, "crash", death_reason(outcome.returncode, leg.cycles_done)
             + (f"; it was at {where}" if where else ""),
             {"returncode": outcome.returncode, "where": where})
        leg.explanation = explain_text(tail, fallback=True)
        return
    if done.get("status") != "passed":
        detail = dict(done.get("detail") or {})
        trace = detail.pop("traceback", None)
        if trace:
            detail["traceback_tail"] = redact_text("\n".join(trace.splitlines()[-25:]))
        reason = done.get("reason") or "failed"
        error = read_error(tail) if plan.script is not None else None
        if error is not None and done.get("failure") in ("error", "crash"):
            detail["command_error"] = error  # the command's own words come first
            reason = f"{reason}: {error['error_line']}"
        fail(leg, done.get("failure") or "error", reason, detail)
        leg.explanation = explain_text((trace or "") + "\n" + tail, fallback=False)
        return
    if stage.cycles and leg.cycles_done < stage.cycles and not done.get("whole_stage"):
        fail(leg, "crash", f"the worker finished after {leg.cycles_done} of {stage.cycles} "
             "cycles")
        return
    if outcome.returncode not in (0, None):
        how = f"signal {leg.signal}" if leg.signal else f"exit code {outcome.returncode}"
        leg.ready.setdefault("warnings", []).append(
            f"the worker finished the stage but then ended with {how}")
    failed = [g for g in leg_gates(plan, key, done_records, completed=True) if g.passed is False]
    if failed:
        fail(leg, "gate", "; ".join(f"{g.name}: {g.detail}" for g in failed))
        return
    leg.status, leg.reason = "passed", None


def fail(leg: LegState, failure: str, reason: str, detail: dict[str, Any] | None = None) -> None:
    leg.status, leg.failure, leg.reason = "failed", failure, redact_text(reason)
    leg.failure_detail = detail or {}


def explain_text(text: str, *, fallback: bool = True) -> list[dict[str, Any]]:
    """Why a stage died, from ``gpu_audit.explain`` when it is installed; without it, and if
    ``fallback``, at least an out-of-memory error in the log is named."""
    if not text.strip():
        return []
    try:
        # The signatures compile only when a failed stage left output to explain.
        from gpu_audit.explain.api import classify_text
    except Exception:  # not installed, or broken: the stage is still judged
        classify_text = None
    if classify_text is not None:
        try:
            incidents = classify_text(text)
        except Exception as exc:
            return [{"cls": "explain-failed", "title": "the log could not be classified",
                     "explanation": f"{type(exc).__name__}: {exc}", "remedy": None,
                     "numbers": {}}]
        return [_incident_dict(incident) for incident in incidents[:3]]
    if not fallback:
        return []

    kind = oom_kind_of_text(text)
    if kind is None:
        return []
    return [{"cls": f"oom-{kind}", "title": "out of memory",
             "explanation": "the stage's log shows an out-of-memory error",
             "remedy": "lower the batch size, or run with --emulate-memory to find what fits",
             "numbers": oom_numbers(text)}]


def _incident_dict(incident: Any) -> dict[str, Any]:
    fields = ("cls", "title", "role", "explanation", "diagnosis", "remedy", "numbers", "excerpt")
    data = {name: getattr(incident, name, None) for name in fields}
    severity = getattr(incident, "severity", None)
    data["severity"] = getattr(severity, "value", severity)
    data["numbers"] = data["numbers"] or {}
    for name in ("title", "explanation", "diagnosis", "remedy", "excerpt"):
        if isinstance(data[name], str):
            data[name] = redact_text(data[name])
    return json.loads(json.dumps(data, default=str))


def stage_location(tail: str) -> str | None:
    """Where the worker's main thread was, from faulthandler's last dump in the log.

    The innermost frame, and the innermost frame of the user's own code when that is further
    out (a hang inside ``time.sleep`` or a crash inside a library is best read with both).
    """
    blocks = _stack_blocks(tail)
    # Any thread may take the signal, so find the stack that runs the stage, not "Current".
    for frames in reversed(blocks):
        if frames and any(marker in frame for frame in frames
                          for marker in ("in run_cycles", "in run_stage")):
            innermost = frames[0]
            own = next((f for f in frames if not _library_frame(f)), None)
            if own is not None and own != innermost:
                return f"{innermost}, called from {own}"
            return innermost
    return None


def script_location(tail: str) -> str | None:
    """Where a command's Python was, from the last stack dump in the log holding a frame of the
    user's own code: that frame, with the innermost one when it lies deeper in a library."""
    blocks = _stack_blocks(tail)
    for frames in reversed(blocks):
        own = next((f for f in frames if not _library_frame(f)), None)
        if own is not None:
            return own if own == frames[0] else f"{frames[0]}, called from {own}"
    return None


def _stack_blocks(tail: str) -> list[list[str]]:
    """The frames of each faulthandler dump in ``tail``, innermost first."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in tail.splitlines():
        if "(most recent call first)" in line:
            current = []
            blocks.append(current)
        elif current is not None and line.startswith("  File "):
            current.append(line.strip())
        else:
            current = None
    return blocks


def _library_frame(frame: str) -> bool:
    """A frame in Python's own library, an installed package or program, or gpu-audit."""
    return library_frame(frame)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def death_reason(returncode: int | None, cycles_done: int) -> str:
    if returncode is None:
        return "the worker vanished"
    if returncode < 0:
        name = signal_name(-returncode)
        return (f"the worker was killed by {name} after {cycles_done} cycles"
                f"{_DEATH_SIGNALS.get(name, '')}")
    return f"the worker exited with code {returncode} after {cycles_done} cycles without a result"
