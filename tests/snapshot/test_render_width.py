"""`gpu-audit snapshot` in an 80-column terminal: the Pools table's headers and figures stay
whole (a header or a size split across lines is unreadable)."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from gpu_audit.snapshot.render import render_terminal
from gpu_audit.snapshot.summary import summarize
from tests.snapshot.test_verdict import fragmented_oom

HEADER_WORDS = ("Pool", "Stream", "Segments", "Reserved", "Allocated", "Free", "blocks",
                "Largest", "External", "frag.")


def _pools_section(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "Pools")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == ""
                and i > start + 4), len(lines))
    return lines[start:end]


def _render(summary, width: int = 80) -> str:
    out = io.StringIO()
    render_terminal(summary, Console(file=out, width=width, no_color=True), source="oom.pickle")
    return out.getvalue()


def _assert_whole(section: list[str], figures: list[str]) -> None:
    words = {word for line in section for word in line.split()}
    assert set(HEADER_WORDS) <= words, section
    body = "\n".join(section)
    for figure in figures:
        assert figure in body, (figure, section)
    assert all(len(line) <= 80 for line in section)


def test_the_pools_table_fits_80_columns() -> None:
    summary = summarize(fragmented_oom())
    section = _pools_section(_render(summary))
    _assert_whole(section, ["6.0 GiB", "3.0 GiB", "256.0 MiB", "91.7%"])
    assert len([line for line in section if "GiB" in line]) == 1  # one row, one line


def test_long_pool_names_and_streams_still_keep_the_figures_whole() -> None:
    summary = summarize(fragmented_oom())
    device = summary.devices[0]
    pool = dataclasses.replace(device.pools[0], pool="large, private pool (1, 2)",
                               stream=94558374912, expandable=True,
                               reserved_bytes=1023 * 1024**2 + 900 * 1024)
    summary = dataclasses.replace(summary, devices=[dataclasses.replace(device, pools=[pool])])
    section = _pools_section(_render(summary))
    _assert_whole(section, ["1023.9 MiB", "256.0 MiB", "91.7%"])


def test_the_snapshot_command_at_80_columns(tmp_path: Path, cli_env) -> None:
    import pickle

    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(fragmented_oom()))
    result = subprocess.run([sys.executable, "-m", "gpu_audit", "snapshot", str(path),
                             "--no-report"], capture_output=True, text=True,
                            env={**cli_env, "COLUMNS": "80"}, cwd=tmp_path, timeout=120)
    assert result.returncode in (0, 1, 2), result.stderr
    _assert_whole(_pools_section(result.stdout), ["6.0 GiB", "256.0 MiB"])


def test_overview_values_wrap_under_their_column() -> None:
    """A long value (the history's start, the OOM line) continues under the values, not at the
    left margin where it would read as a new label."""
    lines = _render(summarize(fragmented_oom())).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("Segments:"))
    end = next(i for i, line in enumerate(lines) if line.strip() == "Pools")
    overview = [line for line in lines[start:end] if line.strip()]
    column = overview[0].index("12")
    for line in overview:
        assert line.startswith("  "), line
        label, _, _ = line.strip().partition(":")
        if not line[:column].strip():
            continue  # a continuation: under the values
        assert line[column - 1] == " " and label, line
    assert any(not line[:column].strip() for line in overview)  # some value did wrap
