"""What a first run of ``gpu-audit validate`` should not get wrong: a sweep recommending from
noise, CPU noise and drift from too few cycles, remedies missing from the terminal, missing torch
blamed on the GPU, and plots that mislead."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpu_audit.cli.rules import all_entries
from gpu_audit.config import Policy
from gpu_audit.units import GIB, MIB
from gpu_audit.validate.device import CPU_THREADS_MAX, cpu_threads
from gpu_audit.validate.findings import validate_findings
from gpu_audit.validate.gates import DRIFT_MIN_CYCLES, summarize
from gpu_audit.validate.plan import ValidateOptions, build_plan
from gpu_audit.validate.plots import label_rows, memory_unit, write_plots
from gpu_audit.validate.report import NOISE_RULE, recommend, render_markdown
from gpu_audit.validate.state import DeviceChoice, LegState, RunState
from tests.validate.runs import TINY, report_of, run_dir, run_validate, state_of
from tests.validate.test_validate_gates import cpu_cycle, cuda_cycle


def row(label: str, conf: str | None, median: float, iqr: float | None) -> dict:
    return {"label": label, "alloc_conf": conf, "passed": True, "oom_retries": 0,
            "alloc_retries": 0, "worst_fragmentation_pct": 10.0, "median_cycle_s": median,
            "iqr_cycle_s": iqr}


def sweep(iqr: float | None) -> list[dict]:
    return [row("max-split-none", None, 0.0131, iqr),
            row("max-split-128", "max_split_size_mb:128", 0.0123, iqr),
            row("max-split-512", "max_split_size_mb:512", 0.0120, iqr)]


# -- the allocator sweep ------------------------------------------------------------------------

def test_no_recommendation_from_a_cpu_run() -> None:
    found = recommend(sweep(0.0001), on_cpu=True, torch_version="2.13.0")
    assert found["label"] is None and found["alloc_conf"] is None
    assert "CPU" in found["text"] and "ALLOC_CONF=" not in found["text"]


def test_no_recommendation_when_medians_differ_less_than_the_spread() -> None:
    # 13.1 / 12.3 / 12.0 ms with 1.5 ms between the quartiles of each: noise.
    found = recommend(sweep(0.0015), torch_version="2.13.0")
    assert found["label"] is None and "ALLOC_CONF=" not in found["text"]
    assert "run-to-run spread" in found["text"] and found["rule"] == NOISE_RULE
    assert "12.0 ms (IQR 1.5 ms)" in found["text"]


def test_a_speed_difference_beyond_the_spread_is_recommended() -> None:
    found = recommend(sweep(0.0001), torch_version="2.13.0")
    assert found["label"] == "max-split-512"
    assert "PYTORCH_ALLOC_CONF='max_split_size_mb:512'" in found["text"]
    assert "more than their spread" in found["text"]
    # Only beyond the larger spread of the two: 12.0 vs 12.3 ms with 0.4 ms IQR is a tie.
    rows = sweep(0.0001)
    rows[1]["iqr_cycle_s"] = 0.0004
    assert recommend(rows)["label"] is None


def test_a_memory_difference_decides_without_timing() -> None:
    rows = sweep(0.0015)
    rows[0]["oom_retries"] = rows[1]["oom_retries"] = 2  # only 512 ran without an OOM retry
    assert recommend(rows)["label"] == "max-split-512"


def test_the_summary_has_the_spread_of_cycle_times() -> None:
    records = [cuda_cycle(i) | {"cycle_s": t} for i, t in enumerate([1.0, 2.0, 3.0, 4.0, 5.0])]
    summary = summarize(records)
    assert summary.median_cycle_s == 3.0 and summary.iqr_cycle_s == pytest.approx(2.0)


# -- drift needs cycles --------------------------------------------------------------------------

def rss_findings(cycles: int) -> set[str]:
    plan = build_plan(ValidateOptions(cycles=cycles, stages=["full"]), Policy(), environ={})
    records = [cpu_cycle(i, rss=300 * MIB + i * 64 * MIB) for i in range(cycles)]
    leg = LegState(status="passed", attempts=1, cycles_done=cycles, ready={"device": "cpu"})
    state = RunState(run_id="r", status="passed", started_at="2026-01-01T00:00:00Z",
                     device=DeviceChoice(requested="cpu", resolved="cpu"),
                     legs={"default/full": leg})
    return {f.id for f in validate_findings(plan, state, {"default/full": records},
                                            host_memory_bytes=64 * GIB)}


def test_no_drift_finding_from_fewer_cycles_than_the_fit_needs() -> None:
    assert DRIFT_MIN_CYCLES == 30
    assert "rss-drift" not in rss_findings(11)
    assert "rss-drift" not in rss_findings(DRIFT_MIN_CYCLES - 1)
    assert "rss-drift" in rss_findings(DRIFT_MIN_CYCLES)
    for finding_id in ("rss-drift", "reserved-drift"):
        assert f"at least {DRIFT_MIN_CYCLES} completed cycles" in " ".join(
            all_entries()[finding_id].doc.split())


# -- CPU threads and host load -----------------------------------------------------------------

def test_cpu_threads_leave_half_the_cpus_to_the_host() -> None:
    assert cpu_threads({}, available=2)[0] == 1
    assert cpu_threads({}, available=1)[0] == 1
    assert cpu_threads({}, available=6)[0] == 3
    assert cpu_threads({}, available=128)[0] == CPU_THREADS_MAX
    count, why = cpu_threads({"OMP_NUM_THREADS": "5"}, available=2)
    assert count == 5 and "OMP_NUM_THREADS" in why
    assert "half of the 2 CPUs" in cpu_threads({}, available=2)[1]


def test_a_cpu_run_records_threads_and_host_load(tmp_path: Path, cli_env: dict) -> None:
    cli_env = {k: v for k, v in cli_env.items() if k != "OMP_NUM_THREADS"}
    done = run_validate(["--device", "cpu", "--workload", f"{TINY}:Counter", "--out",
                         str(tmp_path), "--progress", "none", "--no-plots", "--run-id", "r",
                         "--stage", "imports,smoke"], cli_env)
    assert done.returncode == 0, done.stderr
    run = run_dir(tmp_path, "r")
    state = state_of(run)
    expected = cpu_threads({}, available=len(os.sched_getaffinity(0)))[0]
    for leg in ("default/imports", "default/smoke"):
        load = state["legs"][leg]["load_avg"]
        assert len(load["start"]) == 3 and len(load["end"]) == 3
        assert state["legs"][leg]["ready"]["torch_threads"]["count"] == expected
    stage = report_of(run)["variants"][0]["stages"][1]
    assert stage["host_load"]["start"] and stage["torch_threads"]["count"] == expected
    markdown = (run / "report.md").read_text()
    assert f"torch threads in CPU stages: {expected} (" in markdown
    assert "Host load average (1/5/15 min)" in markdown


# -- the terminal and missing torch ------------------------------------------------------------

def test_the_terminal_summary_prints_each_remedy(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_audit.cli.validate import _print_summary

    doc = {"run": {"status": "failed", "exit_code": 2, "id": "r"}, "device": {"resolved": "cpu"},
           "variants": [], "recommendation": None,
           "findings": [{"severity": "warning", "id": "rss-drift", "subject": "stage:full",
                         "title": "host memory grows",
                         "remedy": "Keep metrics as floats.\nThen run again."},
                        {"severity": "info", "id": "stage-warning", "subject": "stage:full",
                         "title": "x", "remedy": ""}]}
    _print_summary(doc)
    out = capsys.readouterr().out
    assert "    fix: Keep metrics as floats.\n    fix: Then run again.\n" in out


def test_missing_torch_is_a_configuration_error(tmp_path: Path, cli_env: dict) -> None:
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\")\n")
    env = dict(cli_env, PYTHONPATH=f"{fake.parent}{os.pathsep}{cli_env['PYTHONPATH']}")
    out = tmp_path / "out"
    done = run_validate(["--out", str(out), "--progress", "plain", "--no-plots"], env)
    text = done.stdout + done.stderr
    assert done.returncode == 3, text
    assert "torch is not installed" in text
    assert "https://pytorch.org/get-started/locally/" in text
    assert "pip install torch" not in text
    assert "cpu-fallback" not in text and "--resume" not in text and "resume:" not in text
    assert "Traceback" not in text
    assert not (out / "runs").exists() or not any((out / "runs").iterdir())


# -- plots ---------------------------------------------------------------------------------------

def test_the_memory_unit_follows_the_spread_not_the_size() -> None:
    assert memory_unit([4 * GIB, 4 * GIB + 30 * MIB, 4 * GIB + 10 * MIB]) == (MIB, "MiB")
    assert memory_unit([GIB, 3 * GIB]) == (GIB, "GiB")
    assert memory_unit([4 * GIB, 4 * GIB + 100_000, None]) == (1024, "KiB")
    assert memory_unit([]) == (1024, "KiB")


def test_stage_labels_close_together_go_on_separate_rows() -> None:
    # imports and smoke start at cycle 0, classical at 3 of 600: three rows, then back to 0.
    assert label_rows([0.0, 0.0, 0.005, 0.1, 0.6]) == [0, 1, 2, 3, 0]
    assert label_rows([0.0, 0.5, 0.9]) == [0, 0, 0]


def test_a_sweep_draws_one_overlay_per_figure(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    options = ValidateOptions(cycles=40, stages=["smoke", "full"], max_split_size_mb="none,128,512")
    plan = build_plan(options, Policy(), environ={})
    records = {}
    for variant in plan.variants:
        for stage, count in (("smoke", 3), ("full", 40)):
            records[f"{variant.label}/{stage}"] = [
                cuda_cycle(i, reserved=4 * GIB + (i % 3) * 10 * MIB) for i in range(count)]
    paths, note = write_plots(records, tmp_path, plan)
    assert note is None
    assert sorted(Path(p).name for p in paths) == ["fragmentation.png", "memory.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fragmentation.png", "memory.png"]
    assert (tmp_path / "memory.png").read_bytes()[:4] == b"\x89PNG"


def test_a_cpu_sweep_report_links_its_single_plot(tmp_path: Path, cli_env: dict) -> None:
    pytest.importorskip("matplotlib")
    done = run_validate(["--device", "cpu", "--workload", f"{TINY}:Counter", "--out",
                         str(tmp_path), "--progress", "none", "--run-id", "r", "--stage",
                         "smoke", "--max-split-size-mb", "none,128", "--json"], cli_env)
    assert done.returncode == 0, done.stderr
    run = run_dir(tmp_path, "r")
    assert sorted(p.name for p in run.glob("*.png")) == ["memory.png"]
    assert [Path(p).name for p in json.loads(done.stdout)["files"]["plots"]] == ["memory.png"]
    assert "](memory.png)" in (run / "report.md").read_text()
    assert render_markdown(report_of(run)).count(".png)") == 1


def test_a_small_spread_is_drawn_flat_not_zoomed() -> None:
    """400 KiB of noise on 600 MiB: the axis spans 16 MiB about it, in MiB."""
    from gpu_audit.validate.plots import MIN_MEMORY_SPAN, memory_limits

    values = [600 * MIB, 600 * MIB + 400 * 1024, 600 * MIB + 200 * 1024]
    bottom, top = memory_limits(values)
    assert top - bottom == MIN_MEMORY_SPAN and bottom < min(values) and top > max(values)
    assert memory_unit([bottom, top]) == (MIB, "MiB")
    assert memory_limits([0, 1024]) == (0, MIN_MEMORY_SPAN)  # never below zero
    assert memory_limits([GIB, 3 * GIB]) == (GIB, 3 * GIB)  # a real climb keeps its range
    assert memory_limits([None]) is None


def test_the_memory_plot_axis_spans_the_minimum(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.axes

    limits = []
    real = matplotlib.axes.Axes.set_ylim
    monkeypatch.setattr(matplotlib.axes.Axes, "set_ylim",
                        lambda self, *a, **k: (limits.append(a), real(self, *a, **k))[1])
    plan = build_plan(ValidateOptions(cycles=40, stages=["smoke"]), Policy(), environ={})
    records = {f"{plan.variants[0].label}/smoke": [
        cuda_cycle(i, reserved=600 * MIB + (i % 2) * 400 * 1024, allocated=600 * MIB)
        for i in range(10)]}
    write_plots(records, tmp_path, plan)
    bottom, top = next(a for a in limits if len(a) == 2 and a != (0, 100))
    assert top - bottom == 16  # MiB: the 400 KiB wiggle fills 2.5% of the height
