"""Node documents gathered any other way (srun, a CI matrix, a DaemonSet): files and folders.

A folder contributes every ``*.json`` under it (report folders hold a ``.md`` twin beside each
document); fleet documents found in a folder (an earlier merge written to the same folder) are
skipped. A file that cannot be read or judged becomes an UNKNOWN node named by its path, never
a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from gpu_audit.errors import InputError
from gpu_audit.fleet.nodes import Node, node_from_document, unanswered
from gpu_audit.inputs import DOCUMENT_LIMIT, read_input_text

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


def read_node(path: Path) -> Node:
    """The node in one document file; unreadable or foreign files are UNKNOWN nodes."""
    source = str(path)
    try:
        text = read_input_text(path, limit=DOCUMENT_LIMIT, what="node document")
    except InputError as exc:  # a FIFO, a device, too big, not UTF-8, unreadable
        return unanswered(source, source, f"cannot read {exc}")
    except OSError as exc:
        return unanswered(source, source, f"cannot read {source}: {exc.strerror or exc}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return unanswered(source, source, f"not JSON ({exc.msg} at line {exc.lineno} column "
                                          f"{exc.colno}): truncated or not a document")
    except RecursionError:
        return unanswered(source, source, "JSON nested too deeply: not a document")
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
