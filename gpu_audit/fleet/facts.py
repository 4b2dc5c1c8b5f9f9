"""The fast way from a node document's bytes to its :class:`~gpu_audit.fleet.nodes.Node`.

A fleet merge reads tens of thousands of documents, and parsing each into dicts and then
type-checking every GPU reading in Python costs more than everything else the merge does. Here
msgspec decodes the bytes straight into small typed structs holding only the fields the fleet
reads (everything else in the document is skipped unparsed), and the types and caps below
(array lengths, integer ranges, objects where objects belong) are checked while decoding.

Only documents a node can be judged from take this way: any document the structs refuse (a
wrong type, an array over its cap, a GPU without identity, no host and no GPU facts, JSON that
msgspec reads differently from Python, such as ``NaN``) returns ``None``, and the caller judges
it with :func:`~gpu_audit.fleet.nodes.node_from_document`, which gives the reason. So both ways
give the same node for every document; the caps on the raw bytes
(:func:`gpu_audit.bounds.check_json_shape`) run before either.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from gpu_audit import bounds
from gpu_audit.fleet.nodes import (
    GPU_FIELDS,
    NODE_SCHEMAS,
    Node,
    _int,
    _text,
    _unsupported,
    _verdict,
    flagged_processes,
    node_with_conf,
    unanswered,
    verdict_reason,
)

# Integers past int64 (msgspec checks no wider range) go the slow way, which keeps those under
# 20 digits as the fleet rules expect.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Scalar = str | _Int | float | bool | None  # a reading as the fleet compares it


def _capped(most: int) -> Any:
    return Annotated[list[Any], msgspec.Meta(max_length=most)] | None


class GpuFacts(msgspec.Struct):
    """One GPU's compared readings, in :data:`GPU_FIELDS` order (the node keeps them as a dict)."""

    index: _Scalar = None
    uuid: _Scalar = None
    name: _Scalar = None
    utilization_pct: _Scalar = None
    temperature_c: _Scalar = None
    power_draw_w: _Scalar = None
    sm_clock_mhz: _Scalar = None
    ecc_errors_corrected_volatile: _Scalar = None
    ecc_errors_uncorrected_volatile: _Scalar = None
    remapped_rows_correctable: _Scalar = None
    remapped_rows_uncorrectable: _Scalar = None
    pcie_gen_max: _Scalar = None
    pcie_width_current: _Scalar = None
    pcie_width_max: _Scalar = None
    persistence_mode: _Scalar = None
    compute_mode: _Scalar = None
    mig_mode: _Scalar = None
    # Only counted: the entries are skipped unparsed.
    mig_devices: Annotated[list[msgspec.Raw], msgspec.Meta(
        max_length=bounds.MAX_MIG_PER_GPU)] | None = None


assert tuple(GpuFacts.__struct_fields__[:len(GPU_FIELDS)]) == GPU_FIELDS


class HostFacts(msgspec.Struct):
    hostname: Any = None
    boot_time: Any = None


class DriverFacts(msgspec.Struct):
    driver_version: Any = None
    cuda_driver_version: Any = None


class AllocatorFacts(msgspec.Struct):
    torch_version: Any = None
    pytorch_alloc_conf: Any = None
    pytorch_cuda_alloc_conf: Any = None


class ScanFacts(msgspec.Struct):
    """What the fleet reads of a scan: a scan document, or a check document's ``snapshot``."""

    host: HostFacts | None = None
    driver: DriverFacts | None = None
    allocator: AllocatorFacts | None = None
    gpus: Annotated[list[GpuFacts], msgspec.Meta(max_length=bounds.MAX_GPUS)] | None = None
    processes: _capped(bounds.MAX_PROCESSES) = None


class DocumentFacts(ScanFacts):
    """What the fleet reads of a scan or check document (a scan's facts are at its top)."""

    schema: Any = None
    hostname: Any = None
    generated_at: Any = None
    tool_version: Any = None
    exit_code: Any = None
    summary: Any = None
    findings: _capped(bounds.MAX_FINDINGS) = None
    checks: _capped(bounds.MAX_FINDINGS) = None
    snapshot: ScanFacts | None = None


_DECODER = msgspec.json.Decoder(DocumentFacts)


def node_from_bytes(data: bytes, source: str) -> Node | None:
    """The node behind one document's bytes (already size- and shape-checked), or ``None``
    when the document must be judged the slow way (see the module's docstring)."""
    try:
        doc = _DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
        return None
    schema = doc.schema
    kind = NODE_SCHEMAS.get(schema) if isinstance(schema, str) else None
    if kind is None:
        return unanswered(source, source, _unsupported(schema), _text(schema))
    scan = doc.snapshot if kind == "check" else doc
    if scan is None or scan.gpus is None:
        return None
    host = scan.host or HostFacts()
    gpus = [dict(zip(GPU_FIELDS, msgspec.structs.astuple(g)[:len(GPU_FIELDS)], strict=True))
            for g in scan.gpus]
    if (not _text(host.hostname) and not gpus) or not all(map(_identified, gpus)):
        return None
    # The few small parts (verdict, flagged processes) are judged as the slow way does.
    document = {"checks": doc.checks, "findings": doc.findings, "exit_code": doc.exit_code,
                "summary": doc.summary}
    status, worst = _verdict(document, kind)
    driver = scan.driver or DriverFacts()
    allocator = scan.allocator or AllocatorFacts()
    hostname = _text(doc.hostname) or _text(host.hostname)
    return node_with_conf(
        name=hostname or source, source=source, status=status,
        reason=verdict_reason(status, kind, worst),
        schema=schema, kind=kind, hostname=hostname, boot_time=_text(host.boot_time),
        generated_at=_text(doc.generated_at), tool_version=_text(doc.tool_version),
        driver_version=_text(driver.driver_version),
        cuda_driver_version=_text(driver.cuda_driver_version),
        torch_version=_text(allocator.torch_version),
        conf=_text(allocator.pytorch_alloc_conf) or _text(allocator.pytorch_cuda_alloc_conf),
        gpus=gpus, worst=worst,
        processes=flagged_processes(document, {"processes": scan.processes}),
    )


def _identified(gpu: dict[str, Any]) -> bool:
    return _int(gpu["index"]) is not None or bool(_text(gpu["uuid"]) or _text(gpu["name"]))
