"""Node documents gathered any other way (srun, a CI matrix, a DaemonSet): files and folders.

A folder contributes every ``*.json`` under it (report folders hold a ``.md`` twin beside each
document); fleet documents found in a folder (an earlier merge written to the same folder) are
skipped. A file that cannot be read or judged becomes an UNKNOWN node named by its path, never
a crash, and the merge goes on with the others.

Every document is foreign input: read without blocking (a FIFO or a device is refused, never
read), at most :data:`gpu_audit.bounds.MAX_DOCUMENT_BYTES`, and parsed by
:func:`gpu_audit.bounds.load_json`, which refuses on the raw bytes, before parsing, what would
cost far more memory parsed than read (twenty million empty objects in 60 MB).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_audit import bounds
from gpu_audit.errors import InputError
from gpu_audit.fleet.facts import node_from_bytes
from gpu_audit.fleet.nodes import Node, node_from_document, unanswered
from gpu_audit.inputs import read_input

UTF8_STEP = 1 << 20  # bytes decoded at a time to check the text (a whole copy is not needed)

FLEET_PREFIX = "gpu-audit.fleet/"


def gather_files(paths: list[Path]) -> list[tuple[Path, bool]]:
    """(file, named on the command line) for every document to read, in a stable order."""
    found: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            found += [(p, False) for p in sorted(path.rglob("*.json")) if p.is_file()]
        elif path.exists():
            found.append((path, True))
        else:
            raise InputError(f"{path}: no such file or folder")
    if not found:
        raise InputError(f"no *.json documents in {', '.join(str(p) for p in paths)}")
    return found


def read_document(path: Path) -> bytes:
    """The bytes of one document file, UTF-8 checked; ``InputError`` when it cannot be read
    (a FIFO, a device, a folder, over the size limit, not UTF-8, unreadable)."""
    source = str(path)
    try:
        data = read_input(path, limit=bounds.MAX_DOCUMENT_BYTES, what="node document")
    except OSError as exc:
        raise InputError(f"{source}: {exc.strerror or exc}") from None
    if not data.isascii():  # checked piecewise: decoding whole would hold a second copy
        decoder = codecs.getincrementaldecoder("utf-8")()
        view = memoryview(data)
        for start in range(0, len(data), UTF8_STEP):
            try:
                decoder.decode(view[start:start + UTF8_STEP], final=start + UTF8_STEP >= len(data))
            except UnicodeDecodeError as exc:
                raise InputError(f"{source}: not UTF-8 text ({exc.reason} at byte "
                                 f"{start + exc.start})") from None
    return data


def parse_document(data: bytes, source: str) -> Any:
    """The parsed document, or ``InputError`` with the reason the node is UNKNOWN (without
    the file's name, which names the node already)."""
    try:
        return bounds.load_json(data, source)
    except InputError as exc:
        reason = str(exc).removeprefix(f"{source}: ")
        if reason.startswith("not valid JSON"):
            raise InputError(f"not JSON{reason.removeprefix('not valid JSON')}: truncated or "
                             "not a document") from None
        raise InputError(f"refused: {reason}") from None


def read_node(path: Path) -> Node:
    """The node in one document file; unreadable, refused or foreign files are UNKNOWN nodes."""
    source = str(path)
    try:
        data = read_document(path)
    except InputError as exc:
        return unanswered(source, source, f"cannot read {exc}")
    try:
        bounds.check_json_shape(data, source)
    except InputError as exc:
        return unanswered(source, source, f"refused: {str(exc).removeprefix(f'{source}: ')}")
    node = node_from_bytes(data, source)
    if node is not None:
        return node
    try:
        document = parse_document(data, source)
    except InputError as exc:
        return unanswered(source, source, str(exc))
    del data  # the parsed document is what is judged; the text need not stay beside it
    return node_from_document(document, source)


def read_nodes(paths: list[Path], note: Callable[[str], None] | None = None) -> list[Node]:
    """Every node document under ``paths``; ``note`` hears about skipped fleet documents."""
    nodes = []
    for path, named in gather_files(paths):
        node = read_node(path)
        if not named and (node.schema or "").startswith(FLEET_PREFIX):
            if note:
                note(f"skipping {path}: a fleet report, not a node document")
            continue
        nodes.append(node)
    if not nodes:
        raise InputError("no node documents to merge (only fleet reports were found)")
    return nodes
