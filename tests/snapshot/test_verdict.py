"""A snapshot that recorded an out-of-memory event ends in a verdict, as ``explain`` gives one."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from gpu_audit.knowledge.allocator import fragmentation_remedy
from gpu_audit.snapshot.render import allocation_rows, render_markdown, render_terminal
from gpu_audit.snapshot.summary import summarize
from gpu_audit.snapshot.verdict import device_verdict
from tests.report.pasting import pasted_commands, same_command
from tests.snapshot.synthetic import ACTIVATIONS_STACK, GIB, MIB, block, event, segment

BASE = 0x7F0000000000


def fragmented_oom() -> dict[str, Any]:
    """Twelve 512 MiB segments, each half activations and half a free hole: 3.0 GiB free in
    split blocks, the largest 256 MiB, when a 3 GiB request failed with 100 MiB free."""
    segments, trace = [], []
    for i in range(12):
        addr = BASE + i * GIB
        segments.append(segment(0, addr, [
            block(addr, 256 * MIB, "active_allocated", frames=ACTIVATIONS_STACK),
            block(addr + 256 * MIB, 256 * MIB, "inactive"),
        ]))
        trace += [event("segment_alloc", addr, 512 * MIB, 10 * i),
                  event("alloc", addr, 256 * MIB, 10 * i + 1, ACTIVATIONS_STACK)]
    trace.append(event("oom", 0, 3 * GIB, 500, device_free=100 * MIB))
    del trace[-1]["addr"]
    return {"segments": segments, "device_traces": [trace], "allocator_settings": {},
            "external_annotations": []}


def test_split_blocks_too_small_for_the_request_are_fragmentation():
    (device,) = summarize(fragmented_oom()).devices
    assert device.inactive_split_bytes == 3 * GIB
    assert device.largest_free_block_bytes == 256 * MIB
    verdict = device_verdict(device)
    assert verdict is not None and verdict.diagnosis == "fragmentation"
    assert verdict.remedy == fragmentation_remedy(None)
    assert verdict.numbers["requested_bytes"] == 3 * GIB
    assert verdict.numbers["reserved_unallocated_bytes"] == 3 * GIB
    assert "256.0 MiB" in verdict.explanation


def test_no_recorded_oom_no_verdict():
    snap = fragmented_oom()
    snap["device_traces"][0].pop()
    (device,) = summarize(snap).devices
    assert device_verdict(device) is None


def test_identical_biggest_allocations_are_one_row_with_a_count():
    (device,) = summarize(fragmented_oom(), top=10).devices
    rows = allocation_rows(device)
    assert len(rows) == 1
    assert rows[0][0] == "10×"
    assert rows[0][1] == "256.0 MiB"


def test_terminal_and_markdown_say_fragmentation_and_what_to_set():
    summary = summarize(fragmented_oom())
    out = io.StringIO()
    render_terminal(summary, Console(file=out, width=80, no_color=True), source="oom.pickle")
    text = out.getvalue()
    assert "Verdict: out of memory from fragmentation" in text
    (pasted,) = pasted_commands(text)
    assert same_command(pasted, fragmentation_remedy(None).splitlines()[0])
    markdown = render_markdown(summary, title="t", generated_at="now")
    assert "**Verdict: out of memory from fragmentation.**" in markdown
    assert f"```\n{fragmentation_remedy(None)}\n```" in markdown
    assert "| 10× | 256.0 MiB |" in markdown


def test_snapshot_command_prints_the_verdict(tmp_path: Path, cli_env):
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(fragmented_oom()))
    result = subprocess.run([sys.executable, "-m", "gpu_audit", "snapshot", str(path),
                             "--no-report"], capture_output=True, text=True,
                            env={**cli_env, "COLUMNS": "80"}, cwd=tmp_path, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    assert "Verdict: out of memory from fragmentation" in result.stdout
    (pasted,) = pasted_commands(result.stdout)
    assert same_command(pasted, fragmentation_remedy(None).splitlines()[0])


def test_the_json_document_carries_the_verdict():
    from gpu_audit.snapshot.render import snapshot_document

    doc = snapshot_document(summarize(fragmented_oom()), generated_at="now", source={})
    verdict = doc.devices[0]["verdict"]
    assert verdict["diagnosis"] == "fragmentation"
    assert verdict["numbers"]["requested_bytes"] == 3 * GIB
    assert verdict["remedy"] == fragmentation_remedy(None)
