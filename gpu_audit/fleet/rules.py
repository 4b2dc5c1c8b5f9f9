"""Fleet rules: unfit and silent nodes, duplicates, mixed documents, skew between nodes, and the
GPU processes the nodes flagged (copies of one server, leftover or foreign processes), listed
fleet-wide with host and pid so they can be stopped where they run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from gpu_audit import __version__
from gpu_audit.fleet.nodes import Node
from gpu_audit.fleet.registry import FleetView, fleet_rule
from gpu_audit.model import Finding
from gpu_audit.units import fmt_bytes, plural

NAMES_SHOWN = 20  # node names listed in one finding's evidence; the count is always given
ROWS_SHOWN = 200  # process rows in one finding's evidence; the counts are always exact


def names(nodes: list[Node]) -> list[str]:
    return [n.name for n in nodes[:NAMES_SHOWN]]


@fleet_rule("fleet-node-unfit")
def node_unfit(view: FleetView) -> Iterator[Finding]:
    """A node's own scan or check failed (its verdict is CRITICAL).

    One finding per unfit node, with the node's worst findings or failed checks as its
    evidence. The node's own report says more. The fleet's exit code is 2 while any node is
    unfit.

    Why it matters: a job scheduled across the fleet fails, or hangs, on that node, taking every
    other rank with it.

    Example: `gpu-node-07 is unfit: GPU 0: only 1.5 GiB free` - its check verdict is CRITICAL
    (evidence: `worst`, `source`).

    Fix: run `gpu-audit check` on the node, or read its document; then fix or drain it.
    """
    for node in view.live:
        if node.status == "CRITICAL":
            yield Finding(
                subject=f"node:{node.name}",
                title=f"{node.name} is unfit: {node.reason or 'its document gives no reason'}",
                detail=f"Its {node.kind} verdict is CRITICAL ({node.source}).",
                remedy=f"gpu-audit check   # on {node.name}, then fix or drain it",
                evidence={"worst": node.worst, "source": node.source},
            )


@fleet_rule("fleet-node-unknown")
def node_unknown(view: FleetView) -> Iterator[Finding]:
    """A node gave no verdict: it did not answer, or its document could not be judged.

    Reasons: the node died or timed out during the fan-out, gpu-audit (or the same version of
    it) is not installed there, its own scan could not judge it, or the file is unreadable, not
    a gpu-audit document, or of a schema this gpu-audit does not read. A fleet with unknown
    nodes and no unfit one exits 3 (UNKNOWN), never 0.

    Why it matters: an unjudged node may be unfit; a job placed there can fail in ways the fleet
    report cannot warn of.

    Example: `gpu-node-12: no verdict` - not a gpu-audit document (expected a JSON object)
    (evidence: `source`, `schema`).

    Fix: install the same gpu-audit version on every node (`pip install 'gpu-audit==VERSION'`),
    check that the node is alive, then run the fleet command again.
    """
    for node in view.nodes:
        if node.status == "UNKNOWN" and node.duplicate_of is None:
            yield Finding(
                subject=f"node:{node.name}", title=f"{node.name}: no verdict",
                detail=node.reason or "no reason recorded",
                remedy=f"pip install 'gpu-audit=={__version__}' on every node, and check that "
                       "the node is alive; then run the fleet command again",
                evidence={"source": node.source, "schema": node.schema},
            )


@fleet_rule("fleet-nodes-missing")
def nodes_missing(view: FleetView) -> Iterator[Finding]:
    """Nodes the merge was told to expect sent no document.

    `gpu-audit merge --expect N`, `--expect-nodes NODELIST` (a Slurm host list such as
    `gpu[001-004,010]`, e.g. `$SLURM_JOB_NODELIST`) or `--expect-ray` (the alive nodes of the
    Ray cluster) says whom to expect; a named node is found when a document's host name is the
    expected name (case-blind, with or without the domain). The missing nodes are named in the
    terminal, the markdown report and the JSON document (`expected.missing`). The fleet's exit
    code is 3 (UNKNOWN) while a node is missing, unless a node is unfit (2).

    Why it matters: a node that wrote nothing was not judged: it may be the unfit one. Without
    an expectation a fleet of 60 with 5 documents lost looks like a healthy fleet of 55.

    Example: `2 of 60 expected nodes sent no document: gpu007, gpu042` (evidence: `expected`,
    `found`, `missing`).

    Fix: look at those nodes' job output (srun's, the pod's logs), then run `gpu-audit check
    --json --out DIR` there and merge again.
    """
    told = view.expectation
    if told is None or not told.missing_count:
        return
    named = f": {', '.join(told.missing[:NAMES_SHOWN])}" if told.missing else ""
    more = len(told.missing) - NAMES_SHOWN
    yield Finding(
        subject="fleet",
        title=f"{told.missing_count} of {told.expected} expected nodes sent no document{named}"
              + (f" and {more} more" if more > 0 else ""),
        detail=f"Expected {told.expected} nodes ({', '.join(told.sources)}); "
               f"{plural(told.found, 'node')} found.",
        remedy="look at the missing nodes' job output (srun's, the pod's logs); then run "
               "`gpu-audit check --json --out DIR` there and merge again",
        evidence={"expected": told.expected, "found": told.found,
                  "missing_count": told.missing_count, "missing": told.missing[:NAMES_SHOWN]},
    )


@fleet_rule("fleet-duplicate-node")
def duplicate_node(view: FleetView) -> Iterator[Finding]:
    """Two documents describe the same machine (same GPU UUIDs, or same host and boot time).

    Pods or Ray nodes on one host that all see its GPUs, or one node's document saved twice.
    The fleet counts the machine once, judged from the document with the most GPUs (then the
    newest); the others are listed, not judged.

    Why it matters: counted twice, one machine would skew the fleet's majorities and counts.

    Example: `gpu-node-03 is reported 3 times` - counted once; duplicates: pod-a.json, pod-b.json.

    Fix: run one gpu-audit per host (`srun --ntasks-per-node=1`, one pod per node).
    """
    by_kept: dict[str, list[Node]] = {}
    for node in view.nodes:
        if node.duplicate_of is not None:
            by_kept.setdefault(node.duplicate_of, []).append(node)
    for kept, dups in by_kept.items():
        yield Finding(
            subject=f"node:{kept}", title=f"{kept} is reported {len(dups) + 1} times",
            detail=f"Counted once; duplicates: {', '.join(d.source for d in dups[:NAMES_SHOWN])}",
            remedy="run one gpu-audit per host (srun --ntasks-per-node=1, one pod per node)",
            evidence={"duplicates": len(dups), "sources": [d.source for d in dups[:NAMES_SHOWN]]},
        )


@fleet_rule("fleet-mixed-schemas")
def mixed_schemas(view: FleetView) -> Iterator[Finding]:
    """The node documents are not all of one schema (scan and check mixed, or other versions).

    Only the documents judged count: an unreadable document, or one of a schema this gpu-audit
    does not read, is an UNKNOWN node (`fleet-node-unknown`) and is not counted here.

    Why it matters: scan and check documents judge by different policies, so their verdicts are
    not quite comparable across the fleet.

    Example: `2 document schemas in one fleet` - gpu-audit.check/1: 30, gpu-audit.scan/1: 2.

    Fix: gather the same command (`gpu-audit check --json`) with one gpu-audit version on every
    node.
    """
    counts = Counter(n.schema for n in view.live if n.schema)
    if len(counts) > 1:
        yield Finding(
            subject="fleet", title=f"{len(counts)} document schemas in one fleet",
            detail=", ".join(f"{s}: {c}" for s, c in counts.most_common()),
            remedy="gather the same command (`gpu-audit check --json`) with one gpu-audit "
                   "version on every node",
            evidence={"schemas": dict(counts)},
        )


def skew(view: FleetView, attr: Callable[[Node], Any], what: str,
         remedy: str) -> Iterator[Finding]:
    """A finding when the nodes' values of ``attr`` differ; the most common value is the
    reference. When several values share the top count there is no majority (``majority`` is
    null), and the nodes off all of them are listed (none in a tie of every value)."""
    values = [(n, attr(n)) for n in view.live]
    counts = Counter(v for _, v in values if v is not None)
    if len(counts) < 2:
        return
    ranked = counts.most_common()
    top = [v for v, c in ranked if c == ranked[0][1]]
    majority = top[0] if len(top) == 1 else None
    off = [n for n, v in values if v is not None and v not in top]
    if majority is not None:
        against = f"{plural(len(off), 'node')} off the majority {majority}"
    else:
        tied = ", ".join(str(v) for v in top[:5]) + (", ..." if len(top) > 5 else "")
        against = f"no majority ({len(top)} values tie at {plural(ranked[0][1], 'node')} each: " \
                  f"{tied})"
    yield Finding(
        subject="fleet",
        title=f"{what} differs between nodes: {len(counts)} values, {against}",
        detail=", ".join(f"{v}: {plural(c, 'node')}" for v, c in counts.most_common(10)),
        remedy=remedy,
        evidence={"values": {str(v): c for v, c in counts.most_common()}, "majority": majority,
                  "nodes_off_majority": len(off), "nodes": names(off),
                  "nodes_without_value": sum(1 for _, v in values if v is None)},
    )


@fleet_rule("fleet-driver-skew")
def driver_skew(view: FleetView) -> Iterator[Finding]:
    """The NVIDIA driver version differs between nodes.

    The majority version is taken as the reference; the nodes off it are listed.

    Why it matters: mixed drivers give different CUDA features, bugs and performance; a
    data-parallel job runs at the pace of its slowest rank.

    Example: `NVIDIA driver version differs between nodes: 2 values, 3 nodes off the majority
    550.90.07`.

    Fix: install the majority driver on the listed nodes (or drain them).
    """
    yield from skew(view, lambda n: n.driver_version, "NVIDIA driver version",
                    "install the majority driver on the listed nodes (or drain them)")


@fleet_rule("fleet-cuda-skew")
def cuda_skew(view: FleetView) -> Iterator[Finding]:
    """The CUDA version the drivers support differs between nodes.

    The CUDA version follows the driver; the majority version is the reference.

    Why it matters: a torch build that needs a newer CUDA than one node's driver supports fails
    there only, so a multi-node job fails on whichever rank lands there.

    Example: `CUDA driver version differs between nodes: 2 values, 1 node off the majority 12.4`.

    Fix: align the NVIDIA drivers (the CUDA version follows the driver).
    """
    yield from skew(view, lambda n: n.cuda_driver_version, "CUDA driver version",
                    "align the NVIDIA drivers (the CUDA version follows the driver)")


@fleet_rule("fleet-torch-skew")
def torch_skew(view: FleetView) -> Iterator[Finding]:
    """The installed torch version (and build) differs between nodes.

    Nodes where torch is not installed are counted as having no value.

    Why it matters: ranks with different torch builds can disagree on collectives, kernels and
    allocator behaviour.

    Example: `torch version differs between nodes: 2 values, 4 nodes off the majority
    2.5.1+cu124`.

    Fix: `pip install 'torch==<majority version>'` in the job's environment on every node.
    """
    yield from skew(view, lambda n: n.torch_version, "torch version",
                    "pip install 'torch==<majority version>' in the job's environment on "
                    "every node")


@fleet_rule("fleet-tool-version-skew")
def tool_version_skew(view: FleetView) -> Iterator[Finding]:
    """gpu-audit itself is not the same version on every node.

    The fleet still merges the documents; the nodes off the majority version are listed.

    Why it matters: different versions judge by different rules, so their verdicts are not
    comparable.

    Example: `gpu-audit version differs between nodes: 2 values, 2 nodes off the majority 0.9.0`.

    Fix: `pip install 'gpu-audit==<one version>'` on every node.
    """
    yield from skew(view, lambda n: n.tool_version, "gpu-audit version",
                    "pip install 'gpu-audit==<one version>' on every node")


def _gpu_shape(node: Node) -> str | None:
    if not node.gpus:
        return None
    models = Counter(str(g.get("name")) for g in node.gpus)
    return " + ".join(f"{c}x {m}" for m, c in sorted(models.items()))


@fleet_rule("fleet-gpu-mismatch")
def gpu_mismatch(view: FleetView) -> Iterator[Finding]:
    """A node's GPU model or count differs from the majority of the fleet.

    Nodes without GPUs are not compared.

    Why it matters: a node with fewer (or other) GPUs than its peers is usually a GPU that fell
    off the bus or a node in the wrong partition; a job sized for the majority fails there.

    Example: `GPU model or count differs between nodes: 2 values, 1 node off the majority 8x
    NVIDIA H100 80GB HBM3`.

    Fix: `nvidia-smi -L` on the listed nodes: look for a missing GPU.
    """
    yield from skew(view, _gpu_shape, "GPU model or count",
                    "nvidia-smi -L   # on the listed nodes: look for a missing GPU")


def _modes(node: Node) -> str | None:
    if not node.gpus:
        return None
    parts = []
    for key, label in (("persistence_mode", "persistence"), ("compute_mode", "compute"),
                       ("mig_mode", "MIG")):
        seen = sorted({str(g.get(key)) for g in node.gpus if g.get(key) is not None})
        if seen:
            parts.append(f"{label}={'/'.join(seen)}")
    return ", ".join(parts) or None


@fleet_rule("fleet-gpu-mode-skew")
def gpu_mode_skew(view: FleetView) -> Iterator[Finding]:
    """Persistence, compute or MIG mode differs between nodes.

    The modes are compared as one value per node; the majority is the reference.

    Why it matters: MIG on one node changes what a job sees there; an exclusive compute mode
    refuses a second process; persistence off makes the first CUDA call slow.

    Example: `GPU mode (persistence, compute, MIG) differs between nodes: 2 values, 1 node off the
    majority ...`.

    Fix: `nvidia-smi -pm 1; nvidia-smi -c DEFAULT` on the listed nodes, as root.
    """
    yield from skew(view, _modes, "GPU mode (persistence, compute, MIG)",
                    "nvidia-smi -pm 1; nvidia-smi -c DEFAULT   # on the listed nodes, as root")


@fleet_rule("fleet-alloc-conf-skew")
def alloc_conf_skew(view: FleetView) -> Iterator[Finding]:
    """The PyTorch allocator variables differ between nodes.

    `PYTORCH_ALLOC_CONF` / `PYTORCH_CUDA_ALLOC_CONF` are compared per node. Unset counts as a value
    of its own (the default).

    Why it matters: settings that differ per node make ranks fragment and fail differently, so a
    job's out-of-memory depends on where its ranks land.

    Example: `PyTorch allocator setting differs between nodes: 2 values, 3 nodes off the majority
    expandable_segments:True`.

    Fix: export the same `PYTORCH_ALLOC_CONF` and `PYTORCH_CUDA_ALLOC_CONF` in the job's
    environment on every node.
    """
    yield from skew(view, lambda n: n.alloc_conf or "(unset)", "PyTorch allocator setting",
                    "export the same PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF in the "
                    "job's environment on every node")

def process_rows(nodes: list[Node], kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """host + pid rows of the flagged processes of ``kinds``, node by node."""
    return [{"host": node.hostname or node.name, "node": node.name, **p}
            for node in nodes for p in node.processes if p["kind"] in kinds]


def _memory(rows: list[dict[str, Any]]) -> int:
    return sum(r["used_memory_bytes"] for r in rows if isinstance(r["used_memory_bytes"], int))


def _per_host_commands(rows: list[dict[str, Any]], verb: str) -> str:
    hosts: dict[str, list[str]] = {}
    for r in rows:
        if r["pid"] is not None:
            hosts.setdefault(r["host"], []).append(str(r["pid"]))
    shown = list(hosts.items())[:5]
    more = f"   # and {len(hosts) - 5} more host(s): see the evidence" if len(hosts) > 5 else ""
    return "; ".join(f"ssh {h} {verb} {' '.join(pids)}" for h, pids in shown) + more


@fleet_rule("fleet-duplicate-backends")
def duplicate_backends(view: FleetView) -> Iterator[Finding]:
    """Copies of the same server hold GPU memory, listed across the fleet by host and pid.

    Gathered from each node's `duplicate-backend` findings (in a check document, the ones its
    policy did not ignore): one row per copy with its host, pid, user, program, GPU and memory;
    `keep` marks the oldest copy of each group, the one to keep. The memory the other copies
    hold is given for the whole fleet.

    Why it matters: every redundant copy holds its own model in GPU memory that jobs on those
    nodes cannot have.

    Example: `5 redundant server copies on 2 nodes hold 60.0 GiB` (evidence: `processes`,
    `reclaimable_bytes`).

    Fix: the remedy gives a `ps -o pid,lstart,args -p ...` per host: check the pids on their host,
    then stop the stale copies there.
    """
    rows = process_rows(view.live, ("duplicate",))
    if not rows:
        return
    extra = [r for r in rows if not r.get("keep")]
    hosts = sorted({r["host"] for r in rows})
    yield Finding(
        subject="fleet",
        title=f"{len(extra)} redundant server copies on {plural(len(hosts), 'node')} hold "
              f"{fmt_bytes(_memory(extra))}",
        detail=f"Copies of one server on {', '.join(hosts[:10])}"
               + (f" and {len(hosts) - 10} more" if len(hosts) > 10 else "")
               + "; each node keeps its oldest copy.",
        remedy=_per_host_commands(extra, "ps -o pid,lstart,args -p") + "   # then stop the "
               "stale copies on their host",
        evidence={"processes": rows[:ROWS_SHOWN], "count": len(rows),
                  "redundant": len(extra), "nodes": len(hosts),
                  "reclaimable_bytes": _memory(extra)},
    )


@fleet_rule("fleet-leftover-processes")
def leftover_processes(view: FleetView) -> Iterator[Finding]:
    """GPU processes that a node's check flagged, listed across the fleet by host and pid.

    Gathered from each node's `own-processes` (leftovers of the user running check, e.g. an
    earlier job killed by a timeout) and `foreign-processes` (other users' or containers')
    results that warned or failed. One row per process: host, pid, kind (`leftover` or
    `foreign`), user, program, GPU and memory. Only check documents carry these results.

    Why it matters: the memory they hold is memory the next job on those nodes cannot have, and
    a job landing there fails with `CUDA out of memory`.

    Example: `3 flagged GPU processes on 2 nodes hold 41.0 GiB` - 2 leftover processes of the
    checking user and 1 of other users or containers.

    Fix: the remedy gives a `ps -o pid,user,etime,args -p ...` per host: confirm they are left
    over, then stop them on their host (or ask their owners).
    """
    rows = process_rows(view.live, ("leftover", "foreign"))
    if not rows:
        return
    hosts = sorted({r["host"] for r in rows})
    leftover = sum(1 for r in rows if r["kind"] == "leftover")
    yield Finding(
        subject="fleet",
        title=f"{plural(len(rows), 'flagged GPU process', 'flagged GPU processes')} on "
              f"{plural(len(hosts), 'node')} hold "
              f"{fmt_bytes(_memory(rows))}",
        detail=f"{plural(leftover, 'leftover process', 'leftover processes')} of the checking "
               "user and "
               f"{len(rows) - leftover} of other users or containers, on "
               f"{', '.join(hosts[:10])}" + (f" and {len(hosts) - 10} more"
                                             if len(hosts) > 10 else "") + ".",
        remedy=_per_host_commands(rows, "ps -o pid,user,etime,args -p") + "   # confirm they "
               "are left over, then stop them on their host (or ask their owners)",
        evidence={"processes": rows[:ROWS_SHOWN], "count": len(rows), "leftover": leftover,
                  "foreign": len(rows) - leftover, "nodes": len(hosts)},
    )
