"""``gpu-audit merge FILE|DIR...``: judge a fleet from node documents gathered any other way."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gpu_audit import bounds
from gpu_audit.cli.app import err, verbose
from gpu_audit.cli.declared import NO_REPORT, OUT, Option, command, json_option
from gpu_audit.hostname import host_name

EXIT_CODES_HELP = ("Exit codes: 0 OK, 1 WARNING, 2 CRITICAL (a node is unfit), 3 UNKNOWN "
                   "(a node gave no verdict or sent no document, and none is unfit; or bad "
                   "input).")


FLEET_JSON = json_option("the fleet report", "gpu-audit.fleet/1")
OPTIONS = (
    Option("paths", "FILE|DIR...", Path, argument=True, required=True, multiple=True,
           metavar="FILE|DIR...",
           help="Node documents (`gpu-audit scan --json` or `check --json`) or folders of them."),
    Option("expect", "--expect", int, min=1, max=bounds.MAX_FLEET_NODES, metavar="N",
           help="Nodes that should have sent a document; fewer is exit 3 (UNKNOWN) unless a "
                "node is unfit."),
    Option("expect_nodes", "--expect-nodes", str, metavar="NODELIST",
           help="Host names that should have sent a document, as a Slurm host list "
                "(gpu[001-004,010],login1; e.g. $SLURM_JOB_NODELIST); the missing ones are "
                "named."),
    Option("expect_ray", "--expect-ray", bool, False,
           help="Expect the alive nodes of the Ray cluster at RAY_ADDRESS (else the one this "
                "machine belongs to); needs Ray."),
    FLEET_JSON,
    OUT,
    NO_REPORT,
)
RAY_TIMEOUT_S = 30.0  # joining the Ray cluster to list its nodes


@command("merge", OPTIONS, epilog=EXIT_CODES_HELP)
def merge(*, paths: list[Path], expect: int | None, expect_nodes: str | None, expect_ray: bool,
          json_out: bool, out: Path | None, no_report: bool) -> int:
    """Judge many nodes' scan/check documents as one fleet (srun, CI matrix, DaemonSet).

    The fleet's verdict is recomputed from each node's own verdict (the worst one); version
    skew, GPU outliers and duplicate nodes across the fleet are reported beside it. Told whom
    to expect (--expect, --expect-nodes, --expect-ray), it names the nodes that sent nothing.
    """
    from gpu_audit.fleet.inputs import read_nodes
    from gpu_audit.fleet.judge import judge_fleet

    expected = expectation(expect, expect_nodes, expect_ray)
    keep = None
    if not no_report:
        from gpu_audit.config import load_policy

        keep = load_policy().keep_reports  # retention of the report folder
    started = time.perf_counter()
    nodes = read_nodes(paths, note=err)
    report = judge_fleet(nodes, source="merge", expected=expected,
                         duration_s=round(time.perf_counter() - started, 3))
    emit(report, json_out=json_out, out=out, no_report=no_report, command="merge", keep=keep)
    return report.exit_code


def expectation(count: int | None, nodelist: str | None, ray: bool):
    """Whom the merge expects (a :class:`gpu_audit.fleet.expect.Expected`), or None."""
    from gpu_audit.fleet.expect import Expected, expand_hostlist

    if count is None and nodelist is None and not ray:
        return None
    names: list[str] = []
    sources = []
    if count is not None:
        sources.append(f"--expect {count}")
    if nodelist is not None:
        names += expand_hostlist(nodelist)
        sources.append("--expect-nodes")
    if ray:
        names += ray_hostnames()
        sources.append("the Ray cluster's alive nodes")
    if len(names) > bounds.MAX_FLEET_NODES:
        from gpu_audit.errors import UsageError

        raise UsageError(f"more than {bounds.MAX_FLEET_NODES} expected nodes")
    return Expected(count=count, names=tuple(dict.fromkeys(names)), sources=tuple(sources))


def ray_hostnames() -> list[str]:
    """The alive nodes of the Ray cluster, or a usage error saying how to get Ray."""
    from gpu_audit.collect import ray_fanout
    from gpu_audit.errors import UsageError

    try:
        import ray  # noqa: F401  (here, to say which option needs it)
    except ImportError:
        raise UsageError(f"--expect-ray needs Ray, which is not installed here: "
                         f"{ray_fanout.INSTALL_HINT}") from None
    names = ray_fanout.alive_hostnames(None, timeout_s=RAY_TIMEOUT_S)
    if not names:
        raise UsageError("--expect-ray: the Ray cluster has no alive node")
    return names


def emit(report, *, json_out: bool, out: Path | None, no_report: bool, command: str,
         keep: int | None = None) -> None:
    """stdout (JSON or the terminal summary) and the report files (markdown, its JSON twin, the
    per-GPU table as CSV and Parquet, the per-node heat map); shared with ``fleet``. ``keep``:
    the policy's ``keep_reports`` (older reports of ``command`` and their tables are deleted)."""
    import shutil

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

        md = write_report(command, report.generated_at, host_name(), document,
                          render_markdown(report), out, keep=keep, companions=BESIDE_REPORT)
        if md is not None:
            write_gpu_tables(report, md, note=err)
