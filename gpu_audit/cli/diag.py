"""``gpu-audit diag``: active GPU tests in levels, judged against what the GPU model should do."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from gpu_audit.bounds import bounded_int
from gpu_audit.cli.app import err
from gpu_audit.cli.declared import (
    NO_REPORT,
    SPEC_FORMS,
    Option,
    command,
    json_option,
    out_option,
)
from gpu_audit.errors import InputError, UsageError

EXIT_CODES_HELP = ("Exit codes: 0 OK, 1 WARNING, 2 CRITICAL (a test failed), 3 UNKNOWN (bad "
                   "flags, busy GPUs without --force, a torch without CUDA, a GPU in MIG mode, "
                   "or a test that could not run), 130 interrupted (every worker stopped).")


# A planted fault's byte offset indexes a torch buffer: it must fit a signed 64-bit index.
_LARGEST_OFFSET = 2**63 - 1


def parse_plant(text: str | None) -> tuple[int, int] | None:
    """``OFFSET:BIT`` of the test mode's planted memory fault; each number bounded (ASCII
    digits, at most MAX_INT_DIGITS, in range) before it is converted."""
    if text is None:
        return None
    offset, colon, bit = text.partition(":")
    if not (colon and offset.strip() and bit.strip()):
        raise UsageError(f"--plant-fault: {text[:40]!r} is not OFFSET:BIT (a byte offset and a "
                         "bit 0-7, e.g. 4096:3)")
    try:
        return (bounded_int(offset, "--plant-fault: byte offset", high=_LARGEST_OFFSET),
                bounded_int(bit, "--plant-fault: bit", high=7))
    except InputError as exc:
        raise UsageError(f"{exc} (expected OFFSET:BIT, e.g. 4096:3)") from None


OPTIONS = (
    Option("level", "--level", int, 1, min=1, max=3, metavar="1|2|3",
           help="1: seconds (CUDA works, a pattern round trip, a matmul, peer access, plus the "
                "checklist); 2: about a minute per GPU (memory patterns over most free memory, "
                "bandwidths, matmul throughput per dtype, GPU-to-GPU copies and all-reduce); 3: "
                "minutes (sustained load with NVML sampled every second)."),
    Option("gpus", "--gpus", str, metavar="SPEC",
           help=f"GPUs to test: {SPEC_FORMS} (default: all)."),
    json_option("the result", "gpu-audit.diag/1"),
    out_option("the markdown report, its JSON twin and the level-3 plots"),
    NO_REPORT,
    Option("timeout", "--timeout", float, 120.0, min=1, max=86400, metavar="SECONDS",
           help="Longest one test may run before its worker is stopped and the test reported "
                "hung."),
    Option("duration", "--duration", float, 120.0, min=2, max=86400, metavar="SECONDS",
           help="Length of level 3's sustained load."),
    Option("force", "--force", bool, False,
           help="Test GPUs that other processes are using (it disturbs them and lowers the "
                "figures)."),
    Option("device", "--device", str, "cuda", hidden=True,
           help="cpu: the test mode (tests run by torch on the CPU with small sizes; NVML is "
                "still read)."),
    Option("plant_fault", "--plant-fault", str, hidden=True, metavar="OFFSET:BIT",
           help="Test mode: flip this bit in the memory test."),
)


@command("diag", OPTIONS, epilog=EXIT_CODES_HELP)
def diag(
    *,
    level: int,
    gpus: str | None,
    json_out: bool,
    out: Path | None,
    no_report: bool,
    timeout: float,
    duration: float,
    force: bool,
    device: str,
    plant_fault: str | None,
) -> int:
    """Active GPU tests: is each GPU's memory sound, are its bandwidths and throughput what the
    model should deliver, does it hold its speed under load?

    Torch runs in child processes with deadlines. Says how much memory and time it will take
    before it starts; refuses GPUs other processes use unless --force; Ctrl-C stops every worker.
    """
    from gpu_audit.diag.render import diag_document, render_terminal
    from gpu_audit.diag.results import DiagOptions
    from gpu_audit.diag.runner import run_diag
    from gpu_audit.serial import dumps

    if device not in ("cuda", "cpu"):
        raise UsageError(f"--device: {device!r} is not cuda or cpu")
    options = DiagOptions(level=level, gpus=gpus, timeout_s=timeout, force=force,
                          device=device, duration_s=duration, plant=parse_plant(plant_fault))
    keep = None
    if not no_report:  # read before the tests run: a bad setting stops diag before it starts
        from gpu_audit.config import load_policy

        keep = load_policy().keep_reports
    previous = _stop_on_signals()
    try:
        result = run_diag(options, note=err)
    except KeyboardInterrupt:
        err("interrupted: every diag worker was stopped; no report written")
        return 130
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    document = diag_document(result)
    if json_out:
        sys.stdout.write(dumps(document) + "\n")
    else:
        import shutil

        sys.stdout.write(render_terminal(result, max(shutil.get_terminal_size().columns, 40) - 1,
                                         wrap_status=sys.stdout.isatty()))
    sys.stdout.flush()
    if not no_report:
        _write_report(result, document, out, keep)
    return result.exit_code


def _stop_on_signals() -> dict:
    """SIGTERM and SIGHUP (a closed terminal) stop diag as Ctrl-C does: workers killed, exit 130
    (they lead sessions of their own, so nothing else would stop them)."""
    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None:
            previous[signum] = signal.signal(signum, interrupt)
    return previous


def _write_report(result, document: dict, out: Path | None, keep: int | None = None) -> None:
    """The markdown report, its JSON twin and the level-3 plots, side by side (atomic writes);
    then only the newest ``keep`` diag reports (with their plots) stay in the folder."""
    from gpu_audit.diag.plots import PLOT_ENDINGS, write_plots
    from gpu_audit.diag.render import render_markdown
    from gpu_audit.report.files import DEFAULT_FOLDER, prune_reports, unique_stem
    from gpu_audit.serial import dumps, write_atomic

    folder = out or DEFAULT_FOLDER
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stem = unique_stem(folder, "diag", result.generated_at, result.hostname)
        plots = write_plots(result, folder, stem)
        write_atomic(folder / f"{stem}.json", dumps(document) + "\n")
        path = write_atomic(folder / f"{stem}.md", render_markdown(result, plots))
    except OSError as exc:
        message = f"cannot write the report to {folder}: {exc.strerror or exc}"
        if out is not None:
            raise UsageError(message + " (pass a writable --out DIR)") from None
        err(f"{message}; pass --out DIR or --no-report")
        return
    print(f"report: {path}", file=sys.stderr)
    if keep:
        prune_reports(folder, "diag", keep, own=stem, companions=PLOT_ENDINGS)
