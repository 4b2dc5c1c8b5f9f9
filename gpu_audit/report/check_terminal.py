"""The checklist as a person (or a CI log) reads it.

The first line is the monitoring-plugin status line (``CHECK CRITICAL: ... | perfdata``), so the
same output works in a Nagios or Slurm health check; then one line per check with its evidence,
and the fix under every warning and failure. Colour only on a terminal and never with NO_COLOR.
"""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console
from rich.table import Table

from gpu_audit.check.results import CheckReport, CheckStatus, verdict_line
from gpu_audit.report.escape import terminal, terminal_markup
from gpu_audit.report.terminal import print_remedy
from gpu_audit.units import plural

# Every foreign string (subjects, summaries, the policy path) goes through the console escape.
escape = terminal_markup

STATUS_STYLE = {
    CheckStatus.PASS: "green",
    CheckStatus.WARN: "yellow",
    CheckStatus.FAIL: "bold red",
    CheckStatus.SKIP: "dim",
    CheckStatus.UNKNOWN: "magenta",
}


def checklist_table(report: CheckReport, verbose: bool = False, remedies: bool = True) -> Table:
    """One row per check (status, id, subject, outcome) and, with ``remedies``, a ``fix:`` row
    under each problem; long text wraps inside its column so the log stays readable."""
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("status", no_wrap=True, min_width=7)
    table.add_column("check", no_wrap=True)
    table.add_column("subject", no_wrap=True)
    table.add_column("result", overflow="fold")
    for result in report.results:
        style = STATUS_STYLE[result.status]
        quiet = result.status is CheckStatus.SKIP and not verbose
        table.add_row(f"[{style}]{result.status.value.upper()}[/]", escape(result.id),
                      escape(result.subject),
                      f"[dim]{escape(result.summary)}[/]" if quiet else escape(result.summary))
        if remedies and result.remedy and result.status is not CheckStatus.PASS:
            table.add_row("", "", "", f"[dim]fix:[/] {escape(result.remedy)}")
    return table


def _print_checklist(report: CheckReport, console: Console, verbose: bool) -> None:
    """The checklist row by row, each remedy under its check laid out so that its commands
    paste whole (never wrapped inside an argument)."""

    id_width = max((len(terminal(r.id, newlines=False)) for r in report.results), default=0)
    subject_width = max((len(terminal(r.subject, newlines=False)) for r in report.results),
                        default=0)
    indent = 8 + id_width + 1 + subject_width + 1
    if indent + 40 > console.width:
        indent = 8
    for result in report.results:
        row = checklist_table(replace(report, results=[result]), verbose, remedies=False)
        row.columns[1].width, row.columns[2].width = id_width, subject_width
        console.print(row)
        if result.remedy and result.status is not CheckStatus.PASS:
            print_remedy(console, result.remedy, indent)


def render_check(report: CheckReport, console: Console, verbose: bool = False) -> None:
    """The checklist on ``console`` (the command makes it: colour only on a terminal)."""
    # The status line is printed without markup so monitoring wrappers read it verbatim.
    console.print(terminal(verdict_line(report), newlines=False), markup=False, highlight=False,
                  soft_wrap=True)
    console.print()
    _print_checklist(report, console, verbose)
    console.print()
    counts = report.counts()
    tally = ", ".join(f"{counts[s.value]} {s.value}" for s in CheckStatus if counts[s.value])
    source = report.policy.source or "built-in defaults"
    console.print(f"[dim]policy: {escape(source)}[/]")
    selected = report.scan.gpu_selection
    if selected is not None:
        console.print(f"[dim]GPUs judged: {escape(str(selected.get('reason')))}[/]")
    if report.scan.probe_errors:
        console.print(f"[dim]{plural(len(report.scan.probe_errors), 'measurement')} could "
                      "not be taken" + (":" if verbose else " (-v lists them)") + "[/]")
        if verbose:
            for error in report.scan.probe_errors:
                console.print(f"[dim]  {escape(error.subject)}: {escape(error.message)}[/]")
    console.print(f"{tally}; exit code {report.exit_code} ({report.verdict.name})")
