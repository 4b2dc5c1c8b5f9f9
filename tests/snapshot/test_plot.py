"""The memory-over-time plot: a real PNG when there is history, nothing when there is none."""

from __future__ import annotations

from pathlib import Path

from gpu_audit.snapshot.plot import has_history, plot_history
from gpu_audit.snapshot.summary import summarize
from tests.snapshot.synthetic import finetune_oom_after_eval, legacy_2_0_snapshot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_a_snapshot_with_history_gets_a_png(tmp_path: Path):
    summary = summarize(finetune_oom_after_eval())
    assert has_history(summary)
    path = plot_history(summary, tmp_path / "plots" / "memory.png", title="oom.pickle")
    assert path == tmp_path / "plots" / "memory.png"
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000  # axes, two curves, a legend: not an empty canvas
    assert [p.name for p in path.parent.iterdir()] == ["memory.png"]  # written atomically


def test_no_history_no_plot(tmp_path: Path):
    summary = summarize(legacy_2_0_snapshot())
    assert not has_history(summary)
    assert plot_history(summary, tmp_path / "memory.png", title="x") is None
    assert not (tmp_path / "memory.png").exists()
