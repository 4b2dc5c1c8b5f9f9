"""Log text into incidents: the pure half of ``gpu-audit explain`` and its Python API.

Reading files, stdin and compressed logs (and scanning a big one on several cores) is
:mod:`gpu_audit.explain.files`; everything here works on text already in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.explain.classify import Classifier, Incident
from gpu_audit.explain.documents import HEAD_BYTES
from gpu_audit.explain.scanner import BLOCK_SIZE, BlockScanner, Prefilter
from gpu_audit.units import installed_torch_version

SCHEMA = "gpu-audit.explain/1"


class _Detect:
    def __repr__(self) -> str:
        return "<installed torch>"


DETECT: Any = _Detect()  # use the torch installed here (package metadata; never imported)


@dataclass(frozen=True)
class InputStats:
    source: str
    bytes: int  # text bytes read (after decompression)
    lines: int
    compression: str | None = None
    # what found the prefilter's hits: "python" (its passes), or "grep" with how many blocks
    # grep's anchors served and how many the Python passes scanned (not part of any document)
    engine: str = field(default="python", compare=False)


@dataclass(frozen=True)
class ExplainResult:
    incidents: list[Incident]
    inputs: list[InputStats] = field(default_factory=list)
    torch_version: str | None = None
    elapsed_s: float | None = None

    @property
    def failures(self) -> list[Incident]:
        return [i for i in self.incidents if i.is_failure]


def resolve_torch(torch_version: Any) -> str | None:
    if torch_version is DETECT:
        return installed_torch_version()
    return torch_version


def _encode(lines: Iterable[str]) -> Iterator[bytes]:
    """Lines as byte blocks; a line without a trailing newline gets one."""
    batch: list[bytes] = []
    size = 0
    for line in lines:
        data = line.encode("utf-8", errors="replace")
        batch.append(data if data.endswith(b"\n") else data + b"\n")
        size += len(data) + 1
        if size >= BLOCK_SIZE:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)


def consume(classifier: Classifier, name: str, chunks: Iterable[bytes],
             index: int | None = None, prefilter: Prefilter | None = None) -> InputStats:
    index = classifier.add_source(name) if index is None else index
    scanner = BlockScanner(prefilter=prefilter)
    head = b""
    for chunk in chunks:
        if len(head) < HEAD_BYTES:
            head += chunk[:HEAD_BYTES - len(head)]
            if len(head) >= HEAD_BYTES:
                classifier.note_head(index, head, whole=False)
        for candidate in scanner.feed(chunk):
            classifier.feed(index, candidate)
    if len(head) < HEAD_BYTES:  # a source shorter than the head
        classifier.note_head(index, head, whole=True)
    for candidate in scanner.finish():
        classifier.feed(index, candidate)
    return InputStats(name, scanner.bytes, scanner.line_count)


def classify_lines(lines: Iterable[str], *, torch_version: Any = DETECT) -> list[Incident]:
    """Incidents found in ``lines`` (numbered from 1), root cause first.

    ``torch_version`` decides which allocator variable remedies name; by default the torch
    installed here (both variables when there is none).
    """
    classifier = Classifier(resolve_torch(torch_version))
    consume(classifier, "<text>", _encode(lines))
    return classifier.incidents()


def classify_text(text: str, *, torch_version: Any = DETECT) -> list[Incident]:
    """Incidents found in a block of log text, root cause first."""
    return classify_lines([text], torch_version=torch_version)
