"""The fleet report for people: a terminal summary and the markdown report.

Summary first (how many nodes, how many fit, each unfit or silent node on one line), then the
skew findings, the outlier table and the node table.
"""

from __future__ import annotations

from gpu_audit.fleet.judge import FleetReport
from gpu_audit.fleet.nodes import Node
from gpu_audit.redact import redact_text
from gpu_audit.report.escape import md_cell, terminal

NODES_LISTED = 50  # unfit/unknown nodes listed one per line before "... and N more"


def _cell(text: object) -> str:
    return md_cell(redact_text(str(text)))


def _plain(text: object) -> str:
    """One terminal line of text that came from the nodes (names, reasons, titles)."""
    return terminal(redact_text(str(text)), newlines=False)


def headline(report: FleetReport) -> str:
    c = report.counts()
    fit = c["ok"] + c["warning"]
    dup = f", {c['duplicates']} duplicate document(s)" if c["duplicates"] else ""
    return (f"fleet {report.status}: {c['nodes']} node(s), {fit} fit ({c['warning']} with "
            f"warnings), {c['critical']} unfit, {c['unknown']} unknown{dup}")


def _problem_lines(report: FleetReport) -> list[str]:
    bad = [n for n in report.counted if n.status in ("CRITICAL", "UNKNOWN")]
    bad.sort(key=lambda n: (n.status != "CRITICAL", n.name))
    lines = [f"{n.status:<8} {_plain(n.name)}: {_plain(n.reason or 'no reason recorded')}"
             for n in bad[:NODES_LISTED]]
    if len(bad) > NODES_LISTED:
        lines.append(f"... and {len(bad) - NODES_LISTED} more (see the JSON report)")
    return lines


def render_terminal(report: FleetReport, *, verbose: bool = False) -> str:
    """Plain text: the headline, one line per unfit/unknown node, then the fleet findings."""
    lines = [headline(report), *("  " + line for line in _problem_lines(report))]
    others = [f for f in report.findings
              if f.id not in ("fleet-node-unfit", "fleet-node-unknown")]
    if others:
        lines.append("fleet findings:")
        for f in others:
            sev = f.severity.value if f.severity else "info"
            lines.append(f"  {sev:<8} {f.id:<24} {_plain(f.title)}")
            if verbose:
                lines += [f"           {_plain(f.detail)}", f"           fix: {_plain(f.remedy)}"]
    if verbose:
        lines.append("nodes:")
        lines += [f"  {n.status:<8} {_plain(n.name)}  ({_plain(n.source)})" for n in report.nodes]
    return "\n".join(lines) + "\n"


def gpu_csv(report: FleetReport) -> str | None:
    """The per-GPU table of the counted nodes as CSV (None when no node has a GPU)."""
    from gpu_audit.fleet.outliers import gpu_table
    from gpu_audit.fleet.registry import FleetView

    view = FleetView(report.nodes)
    if not any(n.gpus for n in view.live):
        return None
    frame = gpu_table(view)
    return frame.drop(columns=["name"]).assign(model=frame["name"]).to_csv(index=False)


def _node_row(node: Node) -> str:
    status = f"duplicate of {node.duplicate_of}" if node.duplicate_of else node.status
    return (f"| {_cell(node.name)} | {status} | {len(node.gpus) if node.answered else ''} | "
            f"{node.driver_version or ''} | {node.cuda_driver_version or ''} | "
            f"{node.torch_version or ''} | {node.tool_version or ''} | "
            f"{_cell(node.reason or '')} |")


def render_markdown(report: FleetReport) -> str:
    lines = [f"# gpu-audit fleet report ({report.source})", "",
             f"**{headline(report)}** (exit code {report.exit_code})", "",
             f"Generated {report.generated_at}."]
    problems = _problem_lines(report)
    if problems:
        lines += ["", "## Unfit and unknown nodes", ""]
        lines += [f"- {_cell(p)}" for p in problems]
    skews = [f for f in report.findings if f.id.endswith("-skew") or f.id == "fleet-gpu-mismatch"]
    if skews:
        lines += ["", "## Skew between nodes", "", "| finding | values | nodes off the majority |",
                  "|---|---|---|"]
        for f in skews:
            values = ", ".join(f"{k}: {v}" for k, v in f.evidence.get("values", {}).items())
            off = ", ".join(f.evidence.get("nodes", []))
            lines.append(f"| `{f.id}` | {_cell(values)} | {_cell(off)} |")
    outliers = [f for f in report.findings if f.id == "fleet-gpu-outlier"]
    if outliers:
        lines += ["", "## GPU outliers (median/MAD per GPU model)", "",
                  "| GPU | metric | value | median | MAD | z | peers |",
                  "|---|---|---|---|---|---|---|"]
        for f in outliers:
            e = f.evidence
            lines.append(f"| {_cell(f.subject)} | {e['metric']} | {e['value']} | {e['median']} | "
                         f"{e['mad']} | {e['z'] if e['z'] is not None else ''} | {e['peers']} |")
    rest = [f for f in report.findings if f not in skews and f not in outliers
            and f.id not in ("fleet-node-unfit", "fleet-node-unknown")]
    if rest:
        lines += ["", "## Other fleet findings", ""]
        lines += [f"- **{f.id}** ({f.severity.value if f.severity else 'info'}): "
                  f"{_cell(f.title)}. {_cell(f.detail)}" for f in rest]
    lines += ["", "## Nodes", "",
              "| node | verdict | GPUs | driver | CUDA | torch | gpu-audit | reason |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [_node_row(n) for n in report.nodes]
    return "\n".join(lines) + "\n"
