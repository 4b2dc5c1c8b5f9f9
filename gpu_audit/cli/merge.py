"""``gpu-audit merge FILE|DIR...``: judge a fleet from node documents gathered any other way."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gpu_audit.cli.app import err, verbose
from gpu_audit.cli.declared import NO_REPORT, OUT, Option, command, json_option

EXIT_CODES_HELP = ("Exit codes: 0 OK, 1 WARNING, 2 CRITICAL (a node is unfit), 3 UNKNOWN "
                   "(a node gave no verdict and none is unfit, or bad input).")


FLEET_JSON = json_option("the fleet report", "gpu-audit.fleet/1")
OPTIONS = (
    Option("paths", "FILE|DIR...", Path, argument=True, required=True, multiple=True,
           metavar="FILE|DIR...",
           help="Node documents (`gpu-audit scan --json` or `check --json`) or folders of them."),
    FLEET_JSON,
    OUT,
    NO_REPORT,
)


@command("merge", OPTIONS, epilog=EXIT_CODES_HELP)
def merge(*, paths: list[Path], json_out: bool, out: Path | None, no_report: bool) -> int:
    """Judge many nodes' scan/check documents as one fleet (srun, CI matrix, DaemonSet).

    The fleet's verdict is recomputed from each node's own verdict (the worst one); version
    skew, GPU outliers and duplicate nodes across the fleet are reported beside it.
    """
    from gpu_audit.fleet.inputs import read_nodes
    from gpu_audit.fleet.judge import judge_fleet

    keep = None
    if not no_report:
        from gpu_audit.config import load_policy

        keep = load_policy().keep_reports  # retention of the report folder
    started = time.perf_counter()
    nodes = read_nodes(paths, note=err)
    report = judge_fleet(nodes, source="merge",
                         duration_s=round(time.perf_counter() - started, 3))
    emit(report, json_out=json_out, out=out, no_report=no_report, command="merge", keep=keep)
    return report.exit_code


def emit(report, *, json_out: bool, out: Path | None, no_report: bool, command: str,
         keep: int | None = None) -> None:
    """stdout (JSON or the terminal summary) and the report files (markdown, its JSON twin, the
    per-GPU table as CSV and Parquet, the per-node heat map); shared with ``fleet``. ``keep``:
    the policy's ``keep_reports`` (older reports of ``command`` and their tables are deleted)."""
    import shutil
    import socket

    from gpu_audit.fleet.document import fleet_document
    from gpu_audit.fleet.render import render_markdown, render_terminal
    from gpu_audit.serial import dumps

    document = fleet_document(report)
    if json_out:
        sys.stdout.write(dumps(document) + "\n")
    else:
        width = shutil.get_terminal_size().columns - 1 if sys.stdout.isatty() else None
        sys.stdout.write(render_terminal(report, verbose=bool(verbose()), width=width))
    sys.stdout.flush()
    if not no_report:
        from gpu_audit.fleet.render import BESIDE_REPORT, write_gpu_tables
        from gpu_audit.report.files import write_report

        md = write_report(command, report.generated_at, socket.gethostname(), document,
                          render_markdown(report), out, keep=keep, companions=BESIDE_REPORT)
        if md is not None:
            write_gpu_tables(report, md, note=err)
