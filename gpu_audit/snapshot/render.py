"""A memory-snapshot summary as JSON (``gpu-audit.snapshot/1``), markdown and terminal text."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec

from gpu_audit import __version__
from gpu_audit.knowledge.allocator.names import CUDA_VAR
from gpu_audit.redact import redact_settings
from gpu_audit.report.escape import md_code, md_document, md_table, md_text
from gpu_audit.report.escape import terminal_markup as escape
from gpu_audit.report.remedy import remedy_markdown
from gpu_audit.snapshot.summary import DeviceSummary, SnapshotSummary
from gpu_audit.snapshot.verdict import device_verdict
from gpu_audit.units import fmt_bytes, fmt_pct

SCHEMA = "gpu-audit.snapshot/1"
NA = "n/a"

Object = dict[str, Any]


class SnapshotDocument(msgspec.Struct):
    """The ``gpu-audit.snapshot/1`` document (``snapshot --json``)."""

    schema: str
    tool_version: str
    generated_at: str
    source: Object
    format: str | None
    allocator_settings: Any
    devices: list[Object]
    notes: list[str]
    plot: str | None


def snapshot_document(summary: SnapshotSummary, *, generated_at: str, source: dict[str, Any],
                      plot: str | None = None) -> SnapshotDocument:
    """The JSON document; the timeline is cut to at most 500 points (peaks kept)."""
    devices = []
    for device in summary.devices:
        entry = dataclasses.asdict(device)
        verdict = device_verdict(device)
        entry["verdict"] = dataclasses.asdict(verdict) if verdict is not None else None
        if device.trace is not None:
            small = device.trace.timeline.downsampled()
            entry["trace"]["timeline"] = dataclasses.asdict(small)
        devices.append(entry)
    return SnapshotDocument(schema=SCHEMA, tool_version=__version__, generated_at=generated_at,
                            source=source, format=summary.format,
                            allocator_settings=_settings(summary.allocator_settings),
                            devices=devices, notes=summary.notes, plot=plot)


def expandable_free(d: DeviceSummary) -> int:
    return d.free_bytes - d.inactive_split_bytes - d.whole_free_segment_bytes


def device_overview(d: DeviceSummary) -> list[tuple[str, str]]:
    """Label/value lines shared by markdown and terminal output."""
    expandable = f" ({d.expandable_segments} expandable)" if d.expandable_segments else ""
    lines = [
        ("Segments", f"{d.segments}{expandable}"),
        ("Reserved", fmt_bytes(d.reserved_bytes)),
        ("Allocated", f"{fmt_bytes(d.allocated_bytes)} (requested {fmt_bytes(d.requested_bytes)})"),
        ("Reserved but unallocated", f"{fmt_bytes(d.reserved_unallocated_bytes)} "
                                     f"({fmt_pct(d.fragmentation_pct)} of reserved)"),
        ("  trapped in split segments", f"{fmt_bytes(d.inactive_split_bytes)} "
                                        f"({fmt_pct(d.split_fragmentation_pct)} of reserved; "
                                        f"{fmt_pct(d.trapped_pct)} of the slack)"),
        ("  whole free segments", f"{fmt_bytes(d.whole_free_segment_bytes)} "
                                  "(empty_cache() would release these)"),
    ]
    if d.expandable_segments:
        lines.append(("  in expandable segments", f"{fmt_bytes(expandable_free(d))} free "
                                                  "(never split; empty_cache() unmaps it)"))
    lines += [
        ("  freed, awaiting streams", fmt_bytes(d.pending_free_bytes)),
        ("Rounding waste", f"{fmt_bytes(d.free_internal_bytes)} ({fmt_pct(d.rounding_waste_pct)} "
                           "of allocated)"),
        ("Largest free block", fmt_bytes(d.largest_free_block_bytes)),
    ]
    t = d.trace
    if t is not None:
        span = f"{t.span_s:g} s" if t.span_s is not None else "unknown span"
        lines.append(("History", f"{t.events} events over {span}"
                                 + (f" from {t.first_at}" if t.first_at else "")))
        lines.append(("Peak in history", f"allocated {fmt_bytes(t.peak_allocated_bytes)}, "
                                         f"reserved {fmt_bytes(t.peak_reserved_bytes)}"))
        for oom in t.ooms:
            free = fmt_bytes(oom.device_free_bytes)
            lines.append(("Out of memory", f"at {oom.at or 'unknown time'}: request of "
                                           f"{fmt_bytes(oom.request_bytes)} with {free} free "
                                           "on the device"))
    return lines


# Headers break where a terminal table may stack them on two lines (markdown joins them): the
# terminal's Pools table then fits 80 columns, its figures kept whole on their line.
POOL_HEADERS = ["Pool", "Stream", "Segments", "Reserved", "Allocated", "Free", "Free\nblocks",
                "Largest\nfree", "External\nfrag."]
ALLOC_HEADERS = ["Count", "Size", "Requested", "Pool", "Allocated at", "Stack (innermost first)"]
SITE_HEADERS = ["Allocation site", "Live allocations", "Bytes"]


def pool_rows(d: DeviceSummary) -> list[list[str]]:
    return [
        [p.pool + (" (expandable)" if p.expandable else ""), str(p.stream), str(p.segments),
         fmt_bytes(p.reserved_bytes), fmt_bytes(p.allocated_bytes), fmt_bytes(p.free_bytes),
         str(p.free_blocks), fmt_bytes(p.largest_free_block_bytes),
         fmt_pct(p.external_fragmentation_pct)]
        for p in d.pools
    ]


def allocation_rows(d: DeviceSummary, stack: int = 3) -> list[list[str]]:
    """The biggest live allocations, identical rows (size, request, pool, site, stack) merged
    into one with their count."""
    merged: dict[tuple[str, ...], int] = {}
    for a in d.largest_allocations:
        row = (fmt_bytes(a.size_bytes), fmt_bytes(a.requested_bytes), a.pool, a.site or NA,
               " < ".join(a.frames[:stack]) or NA)
        merged[row] = merged.get(row, 0) + 1
    return [[f"{n}×" if n > 1 else "1", *row] for row, n in merged.items()]


def site_rows(d: DeviceSummary) -> list[list[str]]:
    return [[s.site, str(s.allocations), fmt_bytes(s.bytes)] for s in d.sites]


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return md_table([h.replace("\n", " ") for h in headers], rows).split("\n")


def _settings(settings: dict[str, Any] | None) -> dict[str, Any] | None:
    """The snapshot's allocator settings with secrets masked (the file may come from anyone)."""
    if not isinstance(settings, dict):
        return settings
    return {k: redact_settings(v) if isinstance(v, str) else v for k, v in settings.items()}


def _conf(summary: SnapshotSummary) -> str | None:
    """The allocator configuration string the snapshot records, secrets masked."""
    conf = (summary.allocator_settings or {}).get(CUDA_VAR)
    return redact_settings(conf) if isinstance(conf, str) else conf


def render_markdown(summary: SnapshotSummary, *, title: str, generated_at: str,
                    source: str | None = None, plot: str | None = None,
                    preface: list[str] | None = None) -> str:
    out = [f"# {md_text(title)}", "", f"Generated {generated_at} by gpu-audit {__version__}"
           + (f" from {md_code(source)}." if source else "."), ""]
    out += preface or []
    if summary.allocator_settings:
        out += [f"Allocator settings in force: {md_code(_conf(summary) or '(defaults)')}", ""]
    for note in summary.notes:
        out += [f"> {md_text(note)}", ""]
    if plot:
        out += [f"![memory over the recorded history]({plot})", ""]
    for d in summary.devices:
        out += [f"## Device {d.device}", ""]
        verdict = device_verdict(d)
        if verdict is not None:
            out += [f"**Verdict: {md_text(verdict.title)}.** {md_text(verdict.explanation)}", "",
                    "**Fix:**", "", remedy_markdown(verdict.remedy), ""]
        out += [*_md_table(["", ""], [[k, v] for k, v in device_overview(d)]), ""]
        if d.pools:
            out += ["### Pools", "", *_md_table(POOL_HEADERS, pool_rows(d)), ""]
        if d.largest_allocations:
            out += ["### Biggest live allocations", ""]
            out += [*_md_table(ALLOC_HEADERS, allocation_rows(d)), ""]
        if d.sites:
            out += ["### Where live memory was allocated", ""]
            out += [*_md_table(SITE_HEADERS, site_rows(d)), ""]
        if d.trace and d.trace.actions:
            counts = ", ".join(f"{k} {v}" for k, v in d.trace.actions.items())
            out += [f"History events: {md_text(counts)}.", ""]
    if not summary.devices:
        out += ["The snapshot holds no device memory.", ""]
    return md_document("\n".join(out))


def render_terminal(summary: SnapshotSummary, console: Any, *, source: str) -> None:
    """The summary on a rich console (tables; plain text when piped)."""
    from rich import box
    from rich.padding import Padding
    from rich.table import Table

    # rich loads only for a terminal: the monitor writes its summary as Markdown.
    from gpu_audit.report.terminal import print_remedy

    def table(headers: list[str], rows: list[list[str]], title: str, *,
              whole_from: int | None = None) -> Table:
        """Columns from ``whole_from`` on (figures) never wrap and sit one space apart; those
        before it fold."""
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 1) if whole_from is None else (0, 0))
        for i, h in enumerate(headers):
            whole = whole_from is not None and i >= whole_from
            t.add_column(h, overflow="fold", no_wrap=whole, justify="right" if whole else "left",
                         min_width=min(6, len(h)) if whole_from is not None else None)
        for row in rows:
            t.add_row(*(escape(c) for c in row))
        return t

    console.print(f"[bold]Memory snapshot[/] {escape(source)} ({summary.format})")
    if summary.allocator_settings:
        console.print(f"Allocator settings: {escape(repr(_conf(summary) or '(defaults)'))}")
    for note in summary.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    for d in summary.devices:
        console.print(f"\n[bold]Device {d.device}[/]")
        verdict = device_verdict(d)
        if verdict is not None:
            console.print(f"  [bold]Verdict: {escape(verdict.title)}[/]")
            console.print(Padding(escape(verdict.explanation), (0, 0, 0, 2)))
            print_remedy(console, verdict.remedy, indent=2)
            console.print()
        overview = Table.grid(padding=(0, 1), pad_edge=False)
        overview.add_column(no_wrap=True, min_width=30)
        overview.add_column(overflow="fold")
        for label, value in device_overview(d):
            overview.add_row(escape(label + ":"), escape(value))
        console.print(Padding(overview, (0, 0, 0, 2)))
        if d.pools:
            console.print(table(POOL_HEADERS, pool_rows(d), "Pools", whole_from=2))
        if d.largest_allocations:
            console.print(table(ALLOC_HEADERS, allocation_rows(d, stack=2),
                                "Biggest live allocations"))
        if d.sites:
            console.print(table(SITE_HEADERS, site_rows(d), "Where live memory was allocated"))
    if not summary.devices:
        console.print("The snapshot holds no device memory.")
