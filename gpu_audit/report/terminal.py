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
from rich.table import Table

from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.report import allocator_table, tables
from gpu_audit.report.escape import terminal_markup as escape

SEVERITY_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.ERROR: "bold red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}


class TrimmedLines:
    """A text stream that drops the spaces rich pads table rows with, line by line.

    On a terminal the padding is invisible; in a CI log, a pasted issue or a diff it is noise.
    Complete lines are written at once; a partial line waits for its end (or for a flush, when
    it has nothing to trim), so a line written in pieces is trimmed only where it ends.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        if lines:
            self._stream.write("".join(line.rstrip() + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._partial and self._partial == self._partial.rstrip():
            self._stream.write(self._partial)
            self._partial = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8") or "utf-8"


def make_console(file: TextIO | None = None) -> Console:
    file = file or sys.stdout
    is_tty = file.isatty()
    width = None if is_tty else int(os.environ.get("COLUMNS", "0") or 0) or 120
    return Console(
        file=file if is_tty else TrimmedLines(file),  # type: ignore[arg-type]
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
    scan: Scan,
    findings: list[Finding],
    exit_code: int,
    console: Console | None = None,
    verbose: bool = False,
) -> None:
    console = console or make_console()
    for label, value in tables.host_lines(scan):
        console.print(f"[bold]{label + ':':<25}[/] {escape(value)}")
    console.print()
    if scan.gpus:
        gpus = _table(tables.GPU_HEADERS, f"GPUs ({len(scan.gpus)})")
        for gpu in scan.gpus:
            gpus.add_row(*(escape(c) for c in tables.gpu_row(gpu)))
        console.print(gpus)
    if scan.processes:
        procs = _table(tables.PROCESS_HEADERS, f"GPU processes ({len(scan.processes)})")
        for p, row in tables.process_rows(scan):
            style = "yellow" if p.duplicate_group else None
            procs.add_row(*(escape(c) for c in row), style=style)
        console.print(procs)
        if allocator_table.publishing(scan):
            alloc = _table(allocator_table.ALLOCATOR_HEADERS, allocator_table.ALLOCATOR_TITLE)
            for p in allocator_table.publishing(scan):
                alloc.add_row(*(escape(c) for c in allocator_table.allocator_row(p)))
            console.print(alloc)
            console.print(f"[dim]{escape(allocator_table.ALLOCATOR_NOTE)}[/]\n")
    elif scan.nvml.available:
        console.print("No process is using a GPU.\n")
    render_findings(console, findings)
    if scan.probe_errors:
        console.print(
            f"\n[dim]{len(scan.probe_errors)} measurement(s) could not be taken"
            + ("" if verbose else " (-v lists them)")
            + "[/]"
        )
        if verbose:
            for e in scan.probe_errors:
                call = f" [{e.call}]" if e.call else ""
                console.print(f"  [dim]{escape(e.subject)}: {escape(e.message)}{escape(call)}[/]")
    console.print(f"\n{tables.finding_counts(findings)}; exit code {exit_code}")
