"""One fleet member: what the fleet judgement reads from a node's scan or check document.

A node either answered, with a ``gpu-audit.scan/1`` or ``gpu-audit.check/1`` document, or it did
not (a dead node, a timeout, gpu-audit missing there, an unreadable file): then it is UNKNOWN and
carries the reason. A document is foreign input (a file anyone could have written, a node that
lies): one whose arrays exceed what one node can have, or that names neither its host nor any
GPU, or lists GPUs without identity, is UNKNOWN too, never a fit node. Only the facts the fleet
rules compare are kept (as plain scalars), so 10,000 documents fit in memory easily.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from gpu_audit import bounds
from gpu_audit.redact import redact_settings, redact_text

# The node documents this gpu-audit reads, by kind.
NODE_SCHEMAS = {"gpu-audit.scan/1": "scan", "gpu-audit.check/1": "check"}
STATUSES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")  # index = exit code
# Per-GPU fields the fleet keeps (the rest of a GPU's record is not compared across nodes).
GPU_FIELDS = (
    "index", "uuid", "name", "utilization_pct", "temperature_c", "power_draw_w",
    "sm_clock_mhz", "ecc_errors_corrected_volatile", "ecc_errors_uncorrected_volatile",
    "remapped_rows_correctable", "remapped_rows_uncorrectable", "pcie_gen_max",
    "pcie_width_current", "pcie_width_max", "persistence_mode", "compute_mode", "mig_mode",
)
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}
WORST_SHOWN = 3


@dataclass
class Node:
    """One node of the fleet as judged from its document (or from its silence)."""

    name: str
    source: str  # the file it came from, or "ray:<node id>"
    status: str  # one of STATUSES
    reason: str | None = None  # why UNKNOWN, or the node's one-line verdict
    schema: str | None = None
    kind: str | None = None  # "scan" or "check"
    hostname: str | None = None
    boot_time: str | None = None
    generated_at: str | None = None
    tool_version: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    torch_version: str | None = None
    alloc_conf: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    worst: list[dict[str, Any]] = field(default_factory=list)
    duplicate_of: str | None = None
    # GPU processes the node's own judgement flagged (see :func:`flagged_processes`).
    processes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return STATUSES.index(self.status)

    @property
    def answered(self) -> bool:
        return self.kind is not None

    @property
    def uuids(self) -> frozenset[str]:
        return frozenset(g["uuid"] for g in self.gpus if isinstance(g.get("uuid"), str))


def unanswered(name: str, source: str, reason: str, schema: str | None = None) -> Node:
    """A node that gave no document this gpu-audit can judge (the reason may quote an error
    from the node, so it is redacted here, once)."""
    return Node(name=name, source=source, status="UNKNOWN", reason=redact_text(reason),
                schema=schema)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    """An integer a node can report (bool is not one; past 20 digits it is not a reading)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if abs(value) < 10**bounds.MAX_INT_DIGITS else None
    return None


def _scalar(value: Any) -> Any:
    """A reading as the fleet rules and tables can compare it: text, number or flag, else None
    (an object or array where a reading belongs is not a reading)."""
    if isinstance(value, (str, bool, float)) or value is None:
        return value
    return _int(value)


def node_from_document(document: Any, source: str, name: str | None = None) -> Node:
    """The node behind a scan or check document; never raises (a bad document is UNKNOWN)."""
    fallback = name or source
    if not isinstance(document, dict):
        return unanswered(fallback, source, "not a gpu-audit document (expected a JSON object)")
    schema = document.get("schema")
    kind = NODE_SCHEMAS.get(schema) if isinstance(schema, str) else None
    if kind is None:
        return unanswered(fallback, source, _unsupported(schema), _text(schema))
    scan = _dict(document.get("snapshot")) if kind == "check" else document
    host = _dict(scan.get("host"))
    driver = _dict(scan.get("driver"))
    allocator = _dict(scan.get("allocator"))
    hostname = _text(document.get("hostname")) or _text(host.get("hostname"))
    problem = malformed(document, kind)
    if problem:
        return unanswered(name or hostname or source, source, problem, schema)
    gpus = [{k: _scalar(g.get(k)) for k in GPU_FIELDS} for g in scan["gpus"]]
    status, worst = _verdict(document, kind)
    conf = _text(allocator.get("pytorch_alloc_conf")) or _text(
        allocator.get("pytorch_cuda_alloc_conf"))
    return node_with_conf(
        name=name or hostname or source, source=source, status=status,
        reason=verdict_reason(status, kind, worst),
        schema=schema, kind=kind, hostname=hostname, boot_time=_text(host.get("boot_time")),
        generated_at=_text(document.get("generated_at")),
        tool_version=_text(document.get("tool_version")),
        driver_version=_text(driver.get("driver_version")),
        cuda_driver_version=_text(driver.get("cuda_driver_version")),
        torch_version=_text(allocator.get("torch_version")),
        conf=conf, gpus=gpus, worst=worst,
        processes=flagged_processes(document, scan),
    )


def node_with_conf(*, conf: str | None, **fields: Any) -> Node:
    """A judged node, its allocator setting redacted (a node's document may carry a secret)."""
    return Node(alloc_conf=redact_settings(conf) if conf else conf, **fields)


def malformed(document: dict[str, Any], kind: str) -> str | None:
    """Why a scan or check document cannot be judged as one node, or None when it can.

    Checked on the parsed document before anything proportional to its arrays is built: an
    array longer than one node can have (:mod:`gpu_audit.bounds`), a document that names
    neither its host nor a GPU (``{"schema": "gpu-audit.scan/1"}`` alone), GPU entries without
    identity (``{}``). A real node with no GPU states it: a host and an empty ``gpus`` array.
    """
    prefix = "snapshot." if kind == "check" else ""
    scan = document.get("snapshot") if kind == "check" else document
    if not isinstance(scan, dict):
        return "a check document without its 'snapshot' object: not a node's scan"
    arrays = [(f"{prefix}gpus", scan.get("gpus"), bounds.MAX_GPUS),
              (f"{prefix}processes", scan.get("processes"), bounds.MAX_PROCESSES),
              ("findings", document.get("findings"), bounds.MAX_FINDINGS)]
    if kind == "check":  # one result per check and subject: bounded like the findings
        arrays.append(("checks", document.get("checks"), bounds.MAX_FINDINGS))
    for key, value, most in arrays:
        if value is not None and not isinstance(value, list):
            return f"'{key}' is not an array: not a gpu-audit document"
        if value is not None and len(value) > most:
            return (f"refused: '{key}' lists {len(value)} entries, more than one node can have "
                    f"(at most {most})")
    host = scan.get("host")
    if host is not None and not isinstance(host, dict):
        return f"'{prefix}host' is not an object: not a gpu-audit document"
    gpus = scan.get("gpus")
    if not _text(_dict(host).get("hostname")) and not gpus:
        return (f"no host facts ('{prefix}host' with a hostname) and no GPU facts "
                f"('{prefix}gpus'): not a node's scan")
    if gpus is None:
        return f"no '{prefix}gpus' array: not a complete scan"
    return _gpu_problem(gpus, f"{prefix}gpus")


def _gpu_problem(gpus: list[Any], key: str) -> str | None:
    """Why the GPU entries cannot be judged (one without identity, too many MIG devices)."""
    for i, entry in enumerate(gpus):
        if not isinstance(entry, dict):
            return f"'{key}' entry {i} is not an object: not a gpu-audit document"
        if _int(entry.get("index")) is None and not (
                _text(entry.get("uuid")) or _text(entry.get("name"))):
            return (f"'{key}' entry {i} has no identity (index, uuid or name): "
                    "malformed GPU list")
        mig = entry.get("mig_devices")
        if mig is not None and not isinstance(mig, list):
            return f"'{key}' entry {i}: 'mig_devices' is not an array"
        if mig is not None and len(mig) > bounds.MAX_MIG_PER_GPU:
            return (f"refused: '{key}' entry {i} lists {len(mig)} MIG devices, more than one "
                    f"GPU can have (at most {bounds.MAX_MIG_PER_GPU})")
    return None


# Where a node document flags GPU processes: the scan rule that finds copies of one server and
# the check results about leftover processes (the user's own, and other users' or containers').
DUPLICATE_RULE = "duplicate-backend"
PROCESS_CHECKS = {"own-processes": "leftover", "foreign-processes": "foreign"}
PROCESSES_KEPT = 64  # flagged processes kept per node (a node's count is always exact)


def flagged_processes(document: dict[str, Any], scan: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per GPU process the node's own judgement flagged: ``kind`` is ``duplicate``
    (a copy of a server; ``keep`` marks the oldest copy), ``leftover`` or ``foreign``."""
    # Keyed by integer pids only: a pid written as an array or object cannot be a key.
    by_pid = {_int(p.get("pid")): p for p in _list(scan.get("processes")) if isinstance(p, dict)}
    by_pid.pop(None, None)

    def row(kind: str, entry: dict[str, Any], status: str, **extra: Any) -> dict[str, Any]:
        pid = _int(entry.get("pid"))
        seen = _dict(by_pid.get(pid))
        name = _text(entry.get("name")) or _text(seen.get("name"))
        return {"kind": kind, "pid": pid,
                "user": _text(entry.get("user")) or _text(seen.get("user")),
                "name": redact_text(name) if name else None,
                "gpu_index": _int(entry.get("gpu_index")),
                "used_memory_bytes": _int(entry.get("used_memory_bytes")), "status": status,
                **extra}

    def rows() -> Iterator[dict[str, Any]]:
        for finding in _list(document.get("findings")):
            if not (isinstance(finding, dict) and finding.get("id") == DUPLICATE_RULE):
                continue
            judged = _text(finding.get("check_status"))  # a check document: its policy's call
            if finding.get("check_status") is not None and judged not in ("fail", "warn"):
                continue
            evidence = _dict(finding.get("evidence"))
            keep = _int(evidence.get("keep_pid"))
            status = judged or _text(finding.get("severity")) or "warning"
            yield from (row("duplicate", m, status, keep=keep is not None and _int(
                m.get("pid")) == keep) for m in _list(evidence.get("members"))
                if isinstance(m, dict))
        for check in _list(document.get("checks")):
            if not isinstance(check, dict) or check.get("status") not in ("fail", "warn"):
                continue
            kind = PROCESS_CHECKS.get(str(_text(check.get("id"))))
            if kind:
                yield from (row(kind, p, str(check["status"]))
                            for p in _list(_dict(check.get("evidence")).get("processes"))
                            if isinstance(p, dict))

    # Only the rows kept are built: evidence may list far more members than are shown.
    return list(islice(rows(), PROCESSES_KEPT))


def _unsupported(schema: Any) -> str:
    reads = " and ".join(repr(s) for s in NODE_SCHEMAS)
    if isinstance(schema, str) and schema.startswith("gpu-audit.fleet/"):
        return f"a fleet document ({schema!r}), not one node's: merge the node documents instead"
    if isinstance(schema, str) and schema.startswith(("gpu-audit.scan/", "gpu-audit.check/")):
        return f"schema {schema!r} is not supported by this gpu-audit (it reads {reads})"
    return f"not a gpu-audit node document (schema {schema!r}; expected {reads})"


def _verdict(document: dict[str, Any], kind: str) -> tuple[str, list[dict[str, Any]]]:
    """The node's own verdict and its worst findings (or failed checks), worst first.

    A node that is not OK always names what made it so: a check document's failed or warning
    checks, else its findings the policy failed or warned on; a scan document's warnings and
    worse, else (``--fail-on info``) its other findings."""
    findings = [f for f in _list(document.get("findings")) if isinstance(f, dict)]
    if kind == "check":
        items = [
            {"id": _text(c.get("id")),
             "severity": "error" if c.get("status") == "fail" else "warning",
             "subject": _text(c.get("subject")),
             "title": _title(c.get("summary"), c.get("title"), c.get("id"), "a check")}
            for c in _list(document.get("checks"))
            if isinstance(c, dict) and c.get("status") in ("fail", "warn", "unknown")
        ]
        code = document.get("exit_code")
        judged = [f for f in findings if f.get("check_status") in ("fail", "warn")]
        more = [_finding_item(f) for f in judged]
    else:
        items = [_finding_item(f) for f in findings if _rank(f.get("severity")) >= 1]
        code = _dict(document.get("summary")).get("exit_code")
        more = [_finding_item(f) for f in findings]
    code = _int(code)
    if not items and code not in (0, None):
        items = more  # the verdict is not OK: name what the document gives as its reason
    items.sort(key=lambda item: -_rank(item["severity"]))
    if code is None or not 0 <= code < len(STATUSES):
        top = max((_rank(i["severity"]) for i in items), default=0)
        code = 2 if top >= 2 else top
    return STATUSES[code], items[:WORST_SHOWN]


def _finding_item(finding: dict[str, Any]) -> dict[str, Any]:
    return {"id": _text(finding.get("id")), "severity": _text(finding.get("severity")),
            "subject": _text(finding.get("subject")),
            "title": _title(finding.get("title"), finding.get("id"), "a finding")}


def _title(*choices: Any) -> str:
    """The first of ``choices`` that is text (a title, else an id, else a word for it)."""
    return next(c for c in choices if isinstance(c, str) and c.strip())


def verdict_reason(status: str, kind: str, worst: list[dict[str, Any]]) -> str | None:
    """A node's one-line reason: its worst findings' titles; for a node that is not OK whose
    document names nothing, that said (never an empty reason)."""
    reason = "; ".join(w["title"] for w in worst)
    if reason or status == "OK":
        return reason or None
    return f"its {kind} verdict is {status} but its document names no failing check or finding"


def _rank(severity: Any) -> int:
    """A severity's rank; 0 for anything else (a severity written as an array is no key)."""
    return _SEVERITY_RANK.get(severity, 0) if isinstance(severity, str) else 0
