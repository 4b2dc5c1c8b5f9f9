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
from rich.text import Text

from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.report import allocator_table, tables
from gpu_audit.report.escape import terminal
from gpu_audit.report.escape import terminal_markup as escape
from gpu_audit.report.remedy import command_lines, is_command, wrapped
from gpu_audit.units import plural

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
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def print_remedy(console: Console, remedy: str, indent: int) -> None:
    """``fix:`` and the remedy. Commands are never wrapped by the console (a command broken
    inside an argument pastes as two commands): whole, or continued with `` \\`` between whole
    arguments. Sentences wrap between words, and a command quoted in one stays on one line."""
    pad = " " * indent
    width = console.width - indent - 5
    for n, line in enumerate(remedy.splitlines() or [""]):
        lead = Text(pad) + (Text("fix:", style="dim") + " " if n == 0 else Text("     "))
        parts = (command_lines(line.strip(), width) if is_command(line)
                 else wrapped(line, width))
        for k, part in enumerate(parts):
            text = (lead if k == 0 else Text(pad + "     ")) + terminal(part, newlines=False)
            console.print(text, soft_wrap=True)


def render_findings(console: Console, findings: list[Finding]) -> None:
    if not findings:
        console.print("[green]No findings: nothing stands in the way of a run.[/]")
        return
    console.print("[bold]Findings[/]")
    for f in findings:
        severity = f.severity or Severity.INFO
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=8, no_wrap=True)
        grid.add_column(overflow="fold")
        text = (
            f"[bold]{escape(f.id)}[/] ({escape(f.subject)}): {escape(f.title)}\n"
            f"{escape(f.detail)}"
        )
        grid.add_row(f"[{SEVERITY_STYLE[severity]}]{severity.value.upper()}[/]", text)
        console.print(grid)
        print_remedy(console, f.remedy, indent=9)
        console.print()


# Where the GPU table is wider than the console, it is printed as two tables with these
# columns, both starting with the GPU's index and bus id.
_GPU_SPLIT = (("GPU", "Bus id", "Name", "Memory used / total", "Free", "Util"),
              ("GPU", "Bus id", "Temp", "Power", "PCIe", "State"))


def gpu_tables(scan: Scan, width: int) -> list[Table]:
    """The GPUs in one table, or in two where one would not fit ``width`` unwrapped."""
    rows = tables.gpu_rows(scan.gpus)
    headers = tables.GPU_HEADERS
    needed = 2 + sum(max([len(h)] + [len(r[i]) for r in rows]) + 2 for i, h in enumerate(headers))
    parts = [headers] if needed <= width else [list(part) for part in _GPU_SPLIT]
    out = []
    for n, part in enumerate(parts):
        title = f"GPUs ({len(scan.gpus)})" + (", continued" if n else "")
        table = _table(part, title)
        for row in rows:
            cells = [row[headers.index(h)] for h in part]
            if n and not any(cell.strip() for cell in cells[2:]):
                continue  # a MIG instance has no temperature, power or link of its own
            table.add_row(*(escape(cell) for cell in cells))
        out.append(table)
    return out


def _started(value: str, narrow: bool) -> str:
    """``2026-11-23 17:39:57``, or ``11-23 17:39`` where columns are scarce."""
    if narrow and len(value) >= 16 and value[4] == "-":
        return value[5:16]
    return value


def process_table(scan: Scan, width: int) -> Table:
    """The GPU processes in ``width`` columns: the command gets what the other columns leave,
    shortened between whole arguments, never wrapped."""
    narrow = width < 120
    headers = [h for h in tables.PROCESS_HEADERS if h != "Name"]
    name_at = tables.PROCESS_HEADERS.index("Name")
    started_at = headers.index("Started (UTC)")
    rows = []
    for p, row in tables.process_rows(scan, width=width):
        row = row[:name_at] + row[name_at + 1:]
        row[started_at] = _started(row[started_at], narrow)
        rows.append((p, row))
    fixed = 2  # the table's edges; columns are two apart
    for i, header in enumerate(headers[:-1]):
        fixed += max([len(r[i]) for _, r in rows] + [max(len(w) for w in header.split())]) + 2
    command_width = max(width - fixed, 16)
    table = _table(headers, f"GPU processes ({len(scan.processes)})")
    command = table.columns[-1]
    command.no_wrap, command.overflow, command.max_width = True, "ellipsis", command_width
    for p, row in rows:
        row[-1] = tables.process_command(p, command_width)
        style = "yellow" if p.duplicate_group else None
        table.add_row(*(escape(c) for c in row), style=style)
    return table


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
        for table in gpu_tables(scan, console.width):
            console.print(table)
        if verbose:
            for gpu in scan.gpus:
                console.print(f"[dim]{escape(tables.gpu_details(gpu))}[/]")
            console.print()
    if scan.processes:
        console.print(process_table(scan, console.width))
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
            f"\n[dim]{plural(len(scan.probe_errors), 'measurement')} could not be taken"
            + ("" if verbose else " (-v lists them)")
            + "[/]"
        )
        if verbose:
            for e in scan.probe_errors:
                call = f" [{e.call}]" if e.call else ""
                console.print(f"  [dim]{escape(e.subject)}: {escape(e.message)}{escape(call)}[/]")
    console.print(f"\n{tables.finding_counts(findings)}; exit code {exit_code}")
