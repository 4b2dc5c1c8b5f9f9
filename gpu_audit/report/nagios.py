"""Monitoring-plugin output (``scan --format nagios``, ``check --format nagios``).

What Nagios, Icinga, NRPE and the Slurm health-check wrappers built on them read, following the
Monitoring Plugins development guidelines (https://www.monitoring-plugins.org/doc/guidelines.html)
and Icinga's performance-data rules
(https://icinga.com/docs/developer-guidelines/latest/doc/300-plugins/304-performance-data-metrics/):

- the first line is the short output, ``GPU-AUDIT <STATE> - <summary> | <perfdata>``, with the
  state named as the exit code means it (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN);
- then the long output, one line per finding or check that did not pass (at most
  :data:`MAX_DETAIL_LINES`, so NRPE's 4 KiB buffer holds the status line whatever happens);
- performance data is ``'label'=value[UOM];[warn];[crit];[min];[max]``, labels quoted, values in
  the C locale, units ``B`` and ``s`` (trailing empty fields dropped);
- no text line carries a ``|`` (it would start performance data) or a control character.

The exit code is the command's own, unchanged.
"""

from __future__ import annotations

from collections import defaultdict

from gpu_audit.check.results import PERFDATA_ORDER, CheckStatus, verdict_summary
from gpu_audit.model import Finding, GpuProcess, Scan, Severity
from gpu_audit.report.escape import plugin_text
from gpu_audit.rules.processes import unattributed_bytes
from gpu_audit.rules.registry import worst_first

PREFIX = "GPU-AUDIT"
STATES = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}
MAX_DETAIL_LINES = 20
MAX_NAMED = 4  # findings or checks named on the status line itself


def state_name(exit_code: int) -> str:
    """``OK``, ``WARNING``, ``CRITICAL`` or ``UNKNOWN`` (any other code: ``UNKNOWN``)."""
    return STATES.get(exit_code, "UNKNOWN")


def _number(value: float) -> str:
    """A perfdata number: digits, a minus sign and a point only (no exponent, no locale)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def perf(label: str, value: float, uom: str = "", *, warn: float | None = None,
         crit: float | None = None, minimum: float | None = None,
         maximum: float | None = None) -> str:
    """One performance-data item, ``'label'=value[UOM];warn;crit;min;max``."""
    label = plugin_text(label).replace("'", "").replace("=", "_")
    fields = [f"{_number(value)}{uom}"] + ["" if x is None else _number(x)
                                          for x in (warn, crit, minimum, maximum)]
    while fields[-1] == "":
        fields.pop()
    return f"'{label}'=" + ";".join(fields)


def status_line(exit_code: int, summary: str, perfdata: list[str]) -> str:
    """``GPU-AUDIT <STATE> - <summary> | <perfdata>``."""
    line = f"{PREFIX} {state_name(exit_code)} - {plugin_text(summary)}"
    return f"{line} | {' '.join(perfdata)}" if perfdata else line


def plugin_output(first: str, details: list[str]) -> str:
    """The status line and up to :data:`MAX_DETAIL_LINES` long-output lines, newline-ended."""
    lines = [plugin_text(d) for d in details[:MAX_DETAIL_LINES]]
    if len(details) > MAX_DETAIL_LINES:
        lines.append(f"... and {len(details) - MAX_DETAIL_LINES} more")
    return "\n".join([first, *lines]) + "\n"


def unknown_output(message: str) -> str:
    """What a run that could not judge prints (exit 3): the reason on the status line."""
    return plugin_output(status_line(3, message, []), [])


def _named(items: list[tuple[str, str]]) -> str:
    """``a (gpu:0), b and 2 more``: ids with their subjects (``host`` left out)."""
    shown = ", ".join(f"{i} ({s})" if s != "host" else i for i, s in items[:MAX_NAMED])
    more = f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else ""
    return shown + more


def render_scan_nagios(scan: Scan, findings: list[Finding], exit_code: int) -> str:
    """The scan as plugin output: the worst findings on the status line, every finding below."""
    ordered = worst_first(findings)
    notable = [f for f in ordered if (f.severity or Severity.INFO) >= Severity.WARNING]
    gpus = len(scan.gpus)
    where = f"{scan.host.hostname}, {gpus} GPU{'s' if gpus != 1 else ''}"
    if notable:
        summary = f"{_named([(f.id, f.subject) for f in notable])} on {where}"
    else:
        summary = f"no findings at or above warning on {where}"
    counts = {s: sum(1 for f in findings if f.severity == s) for s in Severity}
    perfdata = [perf("gpus", gpus, minimum=0)]
    perfdata += [perf(s.value, counts[s], minimum=0) for s in reversed(Severity)]
    by_gpu: dict[int, list[GpuProcess]] = defaultdict(list)
    for p in scan.processes:
        by_gpu[p.gpu_index].append(p)
    for gpu in scan.gpus:
        if gpu.memory_used_bytes is not None:
            perfdata.append(perf(f"gpu{gpu.index}_memory_used", gpu.memory_used_bytes, "B",
                                 minimum=0, maximum=gpu.memory_total_bytes))
        unattributed = unattributed_bytes(gpu, by_gpu.get(gpu.index, []))
        if unattributed is not None:
            perfdata.append(perf(f"gpu{gpu.index}_unattributed", max(unattributed, 0), "B",
                                 minimum=0, maximum=gpu.memory_total_bytes))
    if scan.scan_duration_s is not None:
        perfdata.append(perf("scan_duration", scan.scan_duration_s, "s", minimum=0))
    details = [f"{(f.severity or Severity.INFO).value.upper()} {f.id} ({f.subject}): {f.title}"
               for f in ordered]
    return plugin_output(status_line(exit_code, summary, perfdata), details)


def render_check_nagios(report) -> str:
    """The check as plugin output: the status line of the checklist (its text and counts), then
    one line per check that did not pass."""

    counts = report.counts()
    perfdata = [perf(name, counts[name], minimum=0) for name in PERFDATA_ORDER]
    if report.duration_s is not None:
        perfdata.append(perf("duration", report.duration_s, "s", minimum=0))
    order = (CheckStatus.FAIL, CheckStatus.UNKNOWN, CheckStatus.WARN)
    details = [f"{r.status.value.upper()} {r.id} ({r.subject}): {r.summary}"
               for status in order for r in report.by_status(status)]
    first = status_line(report.exit_code, verdict_summary(report), perfdata)
    return plugin_output(first, details)
