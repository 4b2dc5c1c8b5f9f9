"""The scan as a person reads it in a terminal: host, GPUs, processes, findings with remedies.

Colour only on a terminal and never with ``NO_COLOR``; piped output is plain text at a sensible
width, so it reads well in CI logs and in a pasted issue.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpu_audit.backends import instance_port
from gpu_audit.model import Finding, Severity, Snapshot
from gpu_audit.report import allocator_table, tables

SEVERITY_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.ERROR: "bold red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}


def make_console(file: TextIO | None = None) -> Console:
    file = file or sys.stdout
    is_tty = file.isatty()
    width = None if is_tty else int(os.environ.get("COLUMNS", "0") or 0) or 120
    return Console(
        file=file,
        width=width,
        no_color=bool(os.environ.get("NO_COLOR")) or None,
        highlight=False,
        soft_wrap=False,
    )


def _table(headers: list[str], title: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def render_findings(console: Console, findings: list[Finding]) -> None:
    if not findings:
        console.print("[green]No findings: nothing stands in the way of a run.[/]")
        return
    console.print("[bold]Findings[/]")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=8, no_wrap=True)
    grid.add_column(overflow="fold")
    for f in findings:
        severity = f.severity or Severity.INFO
        text = (
            f"[bold]{escape(f.id)}[/] ({escape(f.subject)}): {escape(f.title)}\n"
            f"{escape(f.detail)}\n[dim]fix:[/] {escape(f.remedy)}"
        )
        grid.add_row(f"[{SEVERITY_STYLE[severity]}]{severity.value.upper()}[/]", text)
        grid.add_row("", "")
    console.print(grid)


def render_scan(
    snap: Snapshot,
    findings: list[Finding],
    exit_code: int,
    console: Console | None = None,
    verbose: bool = False,
) -> None:
    console = console or make_console()
    for label, value in tables.host_lines(snap):
        console.print(f"[bold]{label + ':':<25}[/] {escape(value)}")
    console.print()
    if snap.gpus:
        gpus = _table(tables.GPU_HEADERS, f"GPUs ({len(snap.gpus)})")
        for gpu in snap.gpus:
            gpus.add_row(*(escape(c) for c in tables.gpu_row(gpu)))
        console.print(gpus)
    if snap.processes:
        procs = _table(tables.PROCESS_HEADERS, f"GPU processes ({len(snap.processes)})")
        for p in snap.processes:
            row = tables.process_row(p, instance_port(p))
            style = "yellow" if p.duplicate_group else None
            procs.add_row(*(escape(c) for c in row), style=style)
        console.print(procs)
        if allocator_table.publishing(snap):
            alloc = _table(allocator_table.ALLOCATOR_HEADERS, allocator_table.ALLOCATOR_TITLE)
            for p in allocator_table.publishing(snap):
                alloc.add_row(*(escape(c) for c in allocator_table.allocator_row(p)))
            console.print(alloc)
            console.print(f"[dim]{escape(allocator_table.ALLOCATOR_NOTE)}[/]\n")
    elif snap.nvml.available:
        console.print("No process is using a GPU.\n")
    render_findings(console, findings)
    if snap.probe_errors:
        console.print(
            f"\n[dim]{len(snap.probe_errors)} measurement(s) could not be taken"
            + ("" if verbose else " (-v lists them)")
            + "[/]"
        )
        if verbose:
            for e in snap.probe_errors:
                call = f" [{e.call}]" if e.call else ""
                console.print(f"  [dim]{escape(e.subject)}: {escape(e.message)}{escape(call)}[/]")
    console.print(f"\n{tables.finding_counts(findings)}; exit code {exit_code}")
