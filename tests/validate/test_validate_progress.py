"""Progress on stderr: a live bar only in an interactive terminal outside CI."""

from __future__ import annotations

import io

import pytest

from gpu_audit.validate.progress import PlainProgress, RichProgress, make_progress


def test_under_ci_progress_is_plain_even_with_force_color(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("CI", "true")
    assert isinstance(make_progress(), PlainProgress)


def test_an_interactive_terminal_gets_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TTY_INTERACTIVE", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    progress = make_progress()
    try:
        assert isinstance(progress, RichProgress)
    finally:
        progress.close()


def test_plain_lines_every_tenth_of_a_stage_not_every_cycle() -> None:
    out = io.StringIO()
    progress = PlainProgress(stream=out)
    progress.stage_started("default/full", "500 cycles, quantum full", 500, 0)
    for cycle in range(500):
        progress.cycle("default/full", {"cycle": cycle, "cycle_s": 0.01,
                                        "reserved_bytes": 3 * 1024**3, "fragmentation_pct": 4.0})
    progress.stage_finished("default/full", "passed", None)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 + 10 + 1
    assert lines[1] == ("[default/full] cycle 50/500, 0.010 s/cycle, reserved 3.0 GiB, frag 4%")
    assert lines[-1] == "[default/full] passed"


def test_plain_progress_says_where_a_resumed_stage_starts() -> None:
    out = io.StringIO()
    progress = PlainProgress(stream=out)
    progress.stage_started("default/full", "100 cycles", 100, 0)
    progress.resumed("default/full", 40)
    progress.cycle("default/full", {"cycle": 41, "cycle_s": 0.01, "rss_bytes": 1024**2})
    assert "resuming at cycle 40 of 100" in out.getvalue()
    assert "cycle 42/100" not in out.getvalue()  # the next line comes 10% later
