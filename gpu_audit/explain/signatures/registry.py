"""What a signature is, and how a failure class registers its signatures.

A :class:`Signature` is one message shape: the regex that reads it, the plain substrings
(``needles``) that must be in a line before the regex runs, its title, severity and causal tier,
how its numbers are read, and its *advisor*: the function that turns those numbers into an
:class:`Advice` (what happened, what to do). Each failure class lives in one module of this
package; it documents itself with :func:`document_class` and registers its signatures with
:func:`signature` (an advisor function) or :func:`fixed` (fixed texts). A signature without
advice, or of an undocumented class, is refused when it is registered.

``tier`` orders incidents by causality, lower first (:data:`TIERS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Severity

# The fixed set of failure classes (an incident's "class" in JSON), one module each: the
# finding catalogue's explain ids, in its order.
CLASSES = tuple(catalogue.ids(catalogue.EXPLAIN, current=True))

# Where a tier puts an incident in the causal chain; tiers in between sit in between (1.5: a
# kill that usually follows a memory problem).
TIERS = (
    (0, "the platform, such as the hardware, the driver or a broken configuration"),
    (1, "the program's own fault"),
    (2, "errors that usually follow an earlier fault"),
    (3, "collective timeouts and errors that echo a failure on another rank"),
    (5, "context"),
)

Extractor = Callable[[re.Match[str], str], dict[str, Any]]


@dataclass(frozen=True)
class AdviceContext:
    torch_version: str | None = None  # the torch the remedies are for (None: unknown)
    # what the log says about its setting, from the lines of "fact" signatures (e.g. the
    # allocator configuration it exported), whichever line of the log they are on
    facts: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Advice:
    title: str
    explanation: str
    remedy: str
    severity: Severity
    tier: float
    diagnosis: str | None = None
    numbers: dict[str, Any] = field(default_factory=dict)


Advisor = Callable[["Signature", dict[str, Any], AdviceContext], Advice]


@dataclass(frozen=True)
class ClassDoc:
    """A failure class: its id, its one-line summary and the text below it."""

    id: str
    summary: str
    body: str


def named(match: re.Match[str], _line: str) -> dict[str, Any]:
    """The regex's named groups that matched, digits as ints. A group named with trailing
    underscores (``pid_``) is another spelling of the same number (``pid``)."""
    out: dict[str, Any] = {}
    for key, value in match.groupdict().items():
        if value is None:
            continue
        value = value.strip().rstrip(".,;:")
        out.setdefault(key.rstrip("_"), int(value) if value.isdigit() else value)
    return out


# The GPU a call's failure names in the field list ONNX Runtime's and CNTK's CUDA checks print
# after the status: "CUDNN failure 4: CUDNN_STATUS_INTERNAL_ERROR ; GPU=0 ; hostname=...".
_GPU_FIELD = re.compile(r"\bGPU ?[=:] ?(\d+)\b")


def with_gpu_field(found: dict[str, Any], line: str) -> dict[str, Any]:
    """``found`` with the GPU index a call's field list names on ``line``, where it does."""
    if gpu := _GPU_FIELD.search(line):
        found["gpu_index"] = int(gpu[1])
    return found


@dataclass(frozen=True)
class Signature:
    id: str  # stable: "<class>/<message kind>"
    cls: str
    regex: re.Pattern[str]
    needles: tuple[str, ...]
    title: str
    advisor: Advisor | None
    example: str  # a real line of this shape: documentation, and the signature's own test
    severity: Severity = Severity.ERROR
    tier: float = 1.0
    extract: Extractor | None = named
    group: str | None = None  # occurrences merge into one incident per (cls, group); default id
    # "only": a continuation line that adds numbers to the latest incident of its class within
    # ``window`` lines (ignored otherwise); "prefer": attach if possible, else a new incident;
    # "latest": as "only", to the latest incident of any class (a line naming the GPU of
    # whatever error a program printed above it)
    attach: str | None = None
    window: int = 8
    # an attached line's numbers replace those of the line it continues (the kernel's "Killed
    # process N" names the victim after "Kill process M ... or sacrifice child")
    overrides: bool = False
    key_field: str | None = None  # occurrences with different values of this number stay apart
    fact: bool = False  # a setting the log states: its numbers go to AdviceContext.facts
    handles: str | None = None  # a class whose recent failure this line says was caught
    # a setting the user made that did not take effect (a warning where something else failed,
    # or in a plain log): the root cause of a report of a problem where nothing else is a failure
    alone_root: bool = False
    # False: not read on a thread's title (a heading), which the title's reading judges (a
    # question, an FAQ, a request, a text that says nothing happened)
    reads_titles: bool = True
    # True: a failure told in general words ("the card disappears", "the job hangs in NCCL"):
    # where a thread's title or a message names a failure of its class, that takes its place
    yields_to_titles: bool = False
    # True: a telling that does not say whose memory ran out ("I always encounter an
    # out-of-memory issue"), read as the GPU's only where the text's first lines name a GPU and
    # not the host's memory (Head.gpu_subject)
    needs_gpu_subject: bool = False

    def advise(self, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
        """What these numbers, read from a line of this shape, mean and what to do."""
        assert self.advisor is not None  # register() refuses a signature without one
        return self.advisor(self, numbers, ctx)


class CatalogueError(ValueError):
    """A signature or class that breaks the catalogue's rules (raised at import)."""


_CLASS_DOCS: dict[str, ClassDoc] = {}
_REGISTERED: dict[str, Signature] = {}


def document_class(cls: str, doc: str | None) -> str:
    """Register the documentation of failure class ``cls`` (its module's docstring), and
    declare it into the finding catalogue where explain documents that id (``nvml-unavailable``
    is documented by its scan rule; its module's text is explain's own view of it)."""
    if cls not in CLASSES:
        raise CatalogueError(f"unknown failure class {cls!r}; the classes are {CLASSES}")
    summary, _, body = (doc or "").strip().partition("\n")
    if not summary or not body.strip():
        raise CatalogueError(f"class {cls!r} needs a summary line and a paragraph below it")
    if catalogue.CATALOGUE[cls].producer == catalogue.EXPLAIN:
        catalogue.document(cls, catalogue.EXPLAIN, doc)
    _CLASS_DOCS[cls] = ClassDoc(cls, summary.strip(), body.strip())
    return cls


def register(sig: Signature) -> Signature:
    """Add ``sig`` to the catalogue; refuse it without advice, example or documented class."""
    if sig.cls not in _CLASS_DOCS:
        raise CatalogueError(f"signature {sig.id!r}: class {sig.cls!r} is not documented")
    if not sig.id.startswith(sig.cls + "/"):
        raise CatalogueError(f"signature {sig.id!r} must be named '{sig.cls}/<kind>'")
    if not callable(sig.advisor):
        raise CatalogueError(f"signature {sig.id!r} has no advice")
    if not sig.example or not sig.needles:
        raise CatalogueError(f"signature {sig.id!r} needs needles and an example line")
    if sig.id in _REGISTERED:
        raise CatalogueError(f"signature {sig.id!r} is registered twice")
    _REGISTERED[sig.id] = sig
    return sig


def _signature(sig_id: str, pattern: str, needles: tuple[str, ...], title: str,
               advisor: Advisor, example: str, options: dict[str, Any]) -> Signature:
    return Signature(sig_id, sig_id.split("/", 1)[0], re.compile(pattern), needles, title,
                     advisor, example, **options)


def signature(sig_id: str, pattern: str, needles: tuple[str, ...], title: str, *,
              example: str, **options: Any) -> Callable[[Advisor], Advisor]:
    """Decorator: register a signature whose advice is the decorated function."""
    def decorate(advisor: Advisor) -> Advisor:
        register(_signature(sig_id, pattern, needles, title, advisor, example, options))
        return advisor
    return decorate


def fixed(sig_id: str, pattern: str, needles: tuple[str, ...], title: str, *, example: str,
          explanation: str, remedy: str, **options: Any) -> Signature:
    """Register a signature whose advice is the same texts whatever its numbers."""
    if not explanation.strip() or not remedy.strip():
        raise CatalogueError(f"signature {sig_id!r} has no advice")

    def same_texts(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
        return advice(sig, numbers, explanation, remedy)

    return register(_signature(sig_id, pattern, needles, title, same_texts, example, options))


def advice(sig: Signature, numbers: dict[str, Any], explanation: str, remedy: str,
           **overrides: Any) -> Advice:
    """An :class:`Advice` with ``sig``'s title, severity and tier unless overridden."""
    return Advice(
        title=overrides.pop("title", sig.title), explanation=explanation, remedy=remedy,
        severity=overrides.pop("severity", sig.severity), tier=overrides.pop("tier", sig.tier),
        numbers=overrides.pop("numbers", numbers), **overrides)


def in_order(order: Iterable[str]) -> tuple[Signature, ...]:
    """Every registered signature, in ``order``; refuses ids missing from either side."""
    order = tuple(order)
    unknown = [sig_id for sig_id in order if sig_id not in _REGISTERED]
    unplaced = [sig_id for sig_id in _REGISTERED if sig_id not in order]
    if unknown or unplaced or len(set(order)) != len(order):
        raise CatalogueError(f"the match order names unregistered signatures {unknown}, leaves "
                             f"out {unplaced}, or repeats one")
    undocumented = [cls for cls in CLASSES if cls not in _CLASS_DOCS]
    if undocumented:
        raise CatalogueError(f"failure classes without a module: {undocumented}")
    return tuple(_REGISTERED[sig_id] for sig_id in order)


def class_docs() -> dict[str, ClassDoc]:
    """The documentation of every failure class, in :data:`CLASSES` order."""
    return {cls: _CLASS_DOCS[cls] for cls in CLASSES if cls in _CLASS_DOCS}
