"""The finding catalogue: every id any command reports, declared once.

Like a linter's code registry: each id of every producer (the scan rules, ``check``'s checks,
``validate``'s and ``diag``'s findings, the fleet and diff rules, ``explain``'s failure classes)
has one entry here with the producers that report it, its default severity, its lifecycle
(``stable``, ``preview``, or ``deprecated`` with the id it ``redirect``s to) and the settings
that tune it. ``gpu-audit rules``, the per-id pages under ``docs/findings/`` and the ``ignore``
key read this table; a producer registers against it (its registry refuses an id that is not
here, and takes the severity from here).

The documentation of an id is its producer's docstring (a scan rule's function, a failure
class's module, ...), declared into the catalogue when the producer registers
(:func:`document`) and parsed into fixed sections (:class:`Doc`). Numbers a text quotes from a
setting's default are ``{placeholders}`` (``{max_swap_used_gib}``) filled when the text is
rendered (:meth:`Doc.render`) from the one declaration of that default, never retyped.

Base layer: this module imports only base modules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import msgspec

from gpu_audit.lazy import regex
from gpu_audit.model import Severity

SCAN, CHECK, VALIDATE, DIAG, FLEET, DIFF, EXPLAIN = (
    "scan", "check", "validate", "diag", "fleet", "diff", "explain")
PRODUCERS = (SCAN, CHECK, VALIDATE, DIAG, FLEET, DIFF, EXPLAIN)
# What each producer is, for listings and pages.
PRODUCER_TITLES = {
    SCAN: "gpu-audit scan (rules)", CHECK: "gpu-audit check (checks)",
    VALIDATE: "gpu-audit validate", DIAG: "gpu-audit diag", FLEET: "gpu-audit fleet and merge",
    DIFF: "gpu-audit diff", EXPLAIN: "gpu-audit explain (failure classes)",
}
STABLE, PREVIEW, DEPRECATED = "stable", "preview", "deprecated"
LIFECYCLES = (STABLE, PREVIEW, DEPRECATED)
CRITICAL, ERROR, WARNING, INFO = Severity.CRITICAL, Severity.ERROR, Severity.WARNING, Severity.INFO

_ID_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def _kebab_case(text: str) -> bool:
    """Lower-case ASCII words and digits joined by single hyphens (``^[a-z0-9]+(-[a-z0-9]+)*$``,
    checked as text: the catalogue is checked on every start, a pattern compiled for it costs
    more than the check)."""
    return all(word and set(word) <= _ID_CHARACTERS for word in text.split("-"))


_PLACEHOLDER = regex(r"\{([a-z][a-z0-9_]*)\}")  # in documentation only: compiled when read


class CatalogueError(ValueError):
    """An entry, a registration or a document that breaks the catalogue's rules."""


class FindingSpec(msgspec.Struct, frozen=True):
    """One id: who reports it, how bad it is by default, where it is in its life."""

    id: str
    producers: tuple[str, ...]  # the first one documents it
    severity: Severity | None  # None: a check (pass/warn/fail) or an explain class
    lifecycle: str = STABLE
    redirect: str | None = None  # a deprecated id: the id that replaces it
    settings: tuple[str, ...] = ()  # the configuration keys that tune it
    # A fault of the machine (hardware, driver, memory a finished job left behind), never of
    # the workload that runs on it: at error or above, a scheduler hook drains the node for it.
    node_problem: bool = False

    @property
    def producer(self) -> str:
        return self.producers[0]

    @property
    def deprecated(self) -> bool:
        return self.lifecycle == DEPRECATED


def _e(finding_id: str, producers: tuple[str, ...], severity: Severity | None, *,
       lifecycle: str = STABLE, redirect: str | None = None,
       settings: tuple[str, ...] = (), node_problem: bool = False) -> FindingSpec:
    return FindingSpec(finding_id, producers, severity, lifecycle, redirect, settings,
                       node_problem)


# Producers in this order; each producer's ids in the order its registry lists them.
_ENTRIES: tuple[FindingSpec, ...] = (
    # scan
    _e("gpu-lost", (SCAN,), CRITICAL, node_problem=True),
    _e("nvml-hung", (SCAN,), ERROR, node_problem=True),
    _e("low-host-memory", (SCAN,), WARNING, settings=("min_host_available_pct",)),
    _e("swap-pressure", (SCAN,), WARNING, settings=("max_swap_used_gib",)),
    _e("low-free-vram", (SCAN,), WARNING, settings=("min_free_vram_pct",)),
    _e("duplicate-backend", (SCAN,), WARNING),
    _e("gpu-process-gone", (SCAN,), WARNING),
    _e("unattributed-vram", (SCAN, CHECK), WARNING,
       settings=("unattributed_vram_allowance_mib", "unattributed_vram")),
    _e("allocator-fragmentation", (SCAN,), WARNING, settings=("alloc_fragmentation_pct",)),
    _e("allocator-oom-retries", (SCAN,), WARNING),
    _e("alloc-conf-advice", (SCAN,), INFO, settings=("small_gpu_gib",)),
    _e("alloc-conf-conflict", (SCAN,), WARNING),
    _e("alloc-conf-deprecated-name", (SCAN,), INFO),
    _e("alloc-conf-ignored", (SCAN,), WARNING),
    _e("alloc-conf-invalid", (SCAN,), ERROR),
    _e("alloc-conf-risky-combination", (SCAN,), WARNING),
    _e("caching-allocator-disabled", (SCAN,), WARNING),
    _e("device-order-mismatch", (SCAN,), WARNING),
    _e("launch-blocking", (SCAN,), WARNING),
    _e("profiler-injection", (SCAN,), WARNING),
    _e("pytorch-no-nvml", (SCAN,), WARNING),
    _e("visible-devices-missing", (SCAN,), ERROR),
    _e("driver-too-old", (SCAN,), ERROR),
    _e("no-kernel-image", (SCAN,), ERROR),
    _e("torch-cpu-only", (SCAN,), ERROR),
    _e("torch-cuda-unavailable", (SCAN,), ERROR),
    _e("torch-import-failed", (SCAN,), ERROR),
    _e("compute-mode-restricted", (SCAN,), WARNING),
    _e("ecc-uncorrectable", (SCAN,), CRITICAL, node_problem=True),
    _e("hw-slowdown", (SCAN,), ERROR, node_problem=True),
    _e("memory-repair-pending", (SCAN,), ERROR, node_problem=True),
    _e("mig-enabled", (SCAN,), INFO),
    _e("pcie-link-degraded", (SCAN,), WARNING, settings=("busy_utilization_pct",)),
    _e("persistence-mode-off", (SCAN,), INFO),
    _e("power-capped", (SCAN,), INFO),
    _e("row-remap-failure", (SCAN,), CRITICAL, node_problem=True),
    _e("temperature-near-slowdown", (SCAN,), WARNING, settings=("temperature_margin_c",)),
    _e("thermal-slowdown", (SCAN,), WARNING),
    _e("xid-events", (SCAN,), ERROR, settings=("xid_recent_hours",), node_problem=True),
    _e("gpu-mode-change-pending", (SCAN,), WARNING),
    _e("memory-temperature-near-limit", (SCAN,), WARNING, settings=("temperature_margin_c",)),
    _e("health-unsupported", (SCAN,), INFO),
    # check
    _e("nvidia-driver", (CHECK,), None, settings=("min_driver_version", "min_cuda_driver_version")),
    _e("gpu-count", (CHECK,), None, settings=("min_gpus",)),
    _e("gpu-name", (CHECK,), None, settings=("gpu_name",)),
    _e("gpu-memory", (CHECK,), None, settings=("min_gpu_memory_gib",)),
    _e("free-vram", (CHECK,), None,
       settings=("min_free_vram_pct", "min_free_vram_gib", "free_vram")),
    _e("gpu-temperature", (CHECK,), None, settings=("max_gpu_temperature_c",)),
    _e("persistence-mode", (CHECK,), None, settings=("require_persistence_mode",)),
    _e("swap", (CHECK,), None, settings=("max_swap_used_gib", "swap")),
    _e("duplicate-backends", (CHECK,), None, settings=("duplicate_backends",)),
    _e("foreign-processes", (CHECK,), None, settings=("foreign_processes",)),
    _e("own-processes", (CHECK,), None, settings=("own_processes",)),
    _e("torch-cuda", (CHECK,), None, settings=("require_torch_cuda",)),
    _e("scan-findings", (CHECK,), None, settings=("fail_on", "warn_on", "ignore")),
    _e("stage-imports", (CHECK,), None),
    _e("stage-smoke", (CHECK,), None),
    _e("diag", (CHECK,), None),
    # validate
    _e("workload-import-failed", (VALIDATE,), CRITICAL),
    _e("cuda-unavailable", (VALIDATE,), CRITICAL),
    _e("oom-unrecovered", (VALIDATE,), CRITICAL),
    _e("stage-hung", (VALIDATE,), CRITICAL),
    _e("worker-died", (VALIDATE,), CRITICAL),
    _e("workload-error", (VALIDATE,), CRITICAL),
    _e("disk-full", (VALIDATE,), CRITICAL),
    _e("alloc-fragmentation", (VALIDATE,), ERROR),
    _e("stage-swap-pressure", (VALIDATE,), ERROR, settings=("max_swap_used_gib",)),
    _e("requirement-failed", (VALIDATE,), ERROR),
    _e("alloc-conf-not-applied", (VALIDATE,), ERROR),
    _e("oom-recovered", (VALIDATE,), WARNING),
    _e("cycles-overshoot", (VALIDATE,), WARNING),
    _e("alloc-retries", (VALIDATE,), WARNING),
    _e("reserved-drift", (VALIDATE,), WARNING),
    _e("rss-drift", (VALIDATE,), WARNING),
    _e("cpu-fallback", (VALIDATE,), WARNING),
    _e("alloc-conf-cpu", (VALIDATE,), INFO),
    _e("stage-warning", (VALIDATE,), INFO),
    # diag
    _e("diag-cuda-failed", (DIAG,), CRITICAL),
    _e("diag-memory-error", (DIAG,), CRITICAL),
    _e("diag-matmul-wrong", (DIAG,), CRITICAL),
    _e("diag-allreduce-wrong", (DIAG,), CRITICAL),
    _e("diag-bandwidth-low", (DIAG,), ERROR),
    _e("diag-throughput-low", (DIAG,), ERROR),
    _e("diag-pcie-link-limited", (DIAG,), WARNING),
    _e("diag-p2p-unavailable", (DIAG,), WARNING),
    _e("diag-thermal-decay", (DIAG,), ERROR),
    _e("diag-throttle-unexpected", (DIAG,), ERROR),
    _e("diag-counter-moved", (DIAG,), CRITICAL),
    _e("diag-test-hung", (DIAG,), CRITICAL),
    _e("diag-worker-died", (DIAG,), CRITICAL),
    _e("diag-model-unknown", (DIAG,), INFO),
    _e("diag-mig-not-tested", (DIAG,), INFO),
    # fleet
    _e("fleet-alloc-conf-skew", (FLEET,), WARNING),
    _e("fleet-cuda-skew", (FLEET,), WARNING),
    _e("fleet-driver-skew", (FLEET,), WARNING),
    _e("fleet-duplicate-backends", (FLEET,), WARNING),
    _e("fleet-duplicate-node", (FLEET,), INFO),
    _e("fleet-gpu-mismatch", (FLEET,), WARNING),
    _e("fleet-gpu-mode-skew", (FLEET,), WARNING),
    _e("fleet-gpu-outlier", (FLEET,), WARNING),
    _e("fleet-leftover-processes", (FLEET,), WARNING),
    _e("fleet-mixed-schemas", (FLEET,), WARNING),
    _e("fleet-node-unfit", (FLEET,), ERROR),
    _e("fleet-node-unknown", (FLEET,), WARNING),
    _e("fleet-nodes-missing", (FLEET,), ERROR),
    _e("fleet-tool-version-skew", (FLEET,), WARNING),
    _e("fleet-torch-skew", (FLEET,), WARNING),
    # diff
    _e("ecc-errors-increased", (DIFF,), CRITICAL, node_problem=True),
    _e("gpu-missing", (DIFF,), CRITICAL, settings=("min_gpus",), node_problem=True),
    _e("job-vram-leak", (DIFF,), ERROR, node_problem=True),
    _e("remapped-rows-increased", (DIFF,), ERROR, node_problem=True),
    _e("retired-pages-increased", (DIFF,), ERROR, node_problem=True),
    _e("throttle-started", (DIFF,), WARNING),
    _e("vram-unreleased", (DIFF,), ERROR, settings=("unreleased_vram_min_gib",),
       node_problem=True),
    _e("xid-new", (DIFF,), ERROR, node_problem=True),
    # explain (failure classes, in the order explain lists them); nvml-unavailable is also a
    # scan rule, which documents it
    _e("cuda-oom", (EXPLAIN,), None),
    _e("nvml-assert-oom", (EXPLAIN,), None),
    _e("nvml-unavailable", (SCAN, EXPLAIN), ERROR, node_problem=True),
    _e("alloc-conf", (EXPLAIN,), None),
    _e("cublas-failure", (EXPLAIN,), None),
    _e("cudnn-failure", (EXPLAIN,), None),
    _e("driver-mismatch", (EXPLAIN,), None),
    _e("illegal-memory-access", (EXPLAIN,), None),
    _e("device-assert", (EXPLAIN,), None),
    _e("gpu-hardware", (EXPLAIN,), None),
    _e("nccl", (EXPLAIN,), None),
    _e("host-oom", (EXPLAIN,), None),
)


def _validated(entries: Iterable[FindingSpec]) -> dict[str, FindingSpec]:
    table: dict[str, FindingSpec] = {}
    for spec in entries:
        problems = []
        if not _kebab_case(spec.id):
            problems.append("is not kebab-case")
        if spec.id in table:
            problems.append("is declared twice")
        if not spec.producers or any(p not in PRODUCERS for p in spec.producers):
            problems.append(f"names producers {spec.producers}, not among {PRODUCERS}")
        if spec.lifecycle not in LIFECYCLES:
            problems.append(f"has lifecycle {spec.lifecycle!r}, not one of {LIFECYCLES}")
        if (spec.redirect is not None) != spec.deprecated:
            problems.append("must name a redirect exactly when it is deprecated")
        if problems:
            raise CatalogueError(f"finding id {spec.id!r} " + "; ".join(problems))
        table[spec.id] = spec
    for spec in table.values():
        target = table.get(spec.redirect or "")
        if spec.deprecated and (target is None or target.deprecated):
            raise CatalogueError(f"deprecated id {spec.id!r} redirects to {spec.redirect!r}, "
                                 "which is not a current id")
    return table


CATALOGUE: dict[str, FindingSpec] = _validated(_ENTRIES)


def ids(producer: str | None = None, *, current: bool = False) -> list[str]:
    """Every id (of ``producer``; with ``current``, deprecated ids left out), in table order."""
    return [spec.id for spec in CATALOGUE.values()
            if (producer is None or producer in spec.producers)
            and not (current and spec.deprecated)]


def node_problems() -> frozenset[str]:
    """The ids declared :attr:`FindingSpec.node_problem`: the machine's faults."""
    return frozenset(spec.id for spec in CATALOGUE.values() if spec.node_problem)


def ignorable() -> set[str]:
    """The ids an ``ignore`` key may name: every id (a deprecated one is redirected)."""
    return set(CATALOGUE)


def spec_of(finding_id: str, producer: str) -> FindingSpec:
    """The entry a producer registers ``finding_id`` against; refuses an id the catalogue does
    not give to ``producer`` (so no producer reports an undeclared id)."""
    spec = CATALOGUE.get(finding_id)
    if spec is None or producer not in spec.producers:
        raise CatalogueError(f"{producer} id {finding_id!r} is not in the finding catalogue "
                             "(gpu_audit/knowledge/findings.py) under that producer")
    if spec.deprecated:
        raise CatalogueError(f"{producer} id {finding_id!r} is deprecated; register "
                             f"{spec.redirect!r} instead")
    return spec


def severity_of(finding_id: str) -> Severity:
    """The default severity of a finding id (a check or explain class has none)."""
    severity = CATALOGUE[finding_id].severity
    if severity is None:
        raise CatalogueError(f"{finding_id!r} has no default severity")
    return severity


def close_matches(name: str, n: int = 3) -> list[str]:
    """The ids closest to a name that is not one (for "did you mean")."""
    import difflib  # a misspelt id only: its import compiles patterns a scan never uses

    return difflib.get_close_matches(name.lower(), list(CATALOGUE), n=n, cutoff=0.6)


def resolve(finding_id: str) -> tuple[str, str | None]:
    """(the current id, a note) for an id a user names: a deprecated id becomes the id it
    redirects to, with a note saying so. Raises KeyError for an unknown id."""
    spec = CATALOGUE[finding_id]
    if not spec.deprecated:
        return finding_id, None
    assert spec.redirect is not None
    return spec.redirect, f"{finding_id!r} is deprecated: it is now {spec.redirect!r}"


# --- documentation ------------------------------------------------------------------------------

# Section labels a docstring paragraph may start with ("Fix: ..."); other paragraphs below the
# summary line are what the finding means.
_LABELS = {"Why it matters:": "why", "Example:": "example", "Fix:": "fix"}


class Doc(msgspec.Struct, frozen=True):
    """An id's documentation in fixed sections (a section its text has nothing for is "")."""

    summary: str  # one line
    meaning: str = ""  # what it means
    why: str = ""  # why it matters
    example: str = ""  # evidence or output, as the producer shows it
    fix: str = ""

    def placeholders(self) -> set[str]:
        return {name for field in self.__struct_fields__
                for name in _PLACEHOLDER().findall(getattr(self, field))}

    def render(self, values: Mapping[str, str]) -> Doc:
        """The text with each ``{name}`` replaced by ``values[name]``; an unknown name is an
        error (a threshold quoted in a text must come from its declaration)."""
        def fill(match: re.Match[str]) -> str:
            if match.group(1) not in values:
                raise CatalogueError(f"{{{match.group(1)}}} in a finding's documentation names "
                                     "no declared default")
            return values[match.group(1)]

        placeholder = _PLACEHOLDER()
        return msgspec.structs.replace(self, **{field: placeholder.sub(fill, getattr(self, field))
                                                for field in self.__struct_fields__})


def parse_doc(text: str) -> Doc:
    """A docstring as sections: its first line is the summary; a paragraph that starts with a
    label (``Why it matters:``, ``Example:``, ``Fix:``) opens that section, and the paragraphs
    after it belong to it until the next label; the others say what the finding means."""
    lines = text.strip().splitlines()
    summary = lines[0].strip() if lines else ""
    sections: dict[str, list[str]] = {"meaning": []}
    current = "meaning"
    body = "\n".join(_dedent(lines[1:])).strip()
    for paragraph in re.split(r"\n\s*\n", body) if body else []:
        for label, name in _LABELS.items():
            if paragraph.startswith(label):
                current, paragraph = name, paragraph[len(label):].lstrip(" ").lstrip("\n")
                break
        sections.setdefault(current, []).append(paragraph)
    return Doc(summary, **{name: "\n\n".join(p for p in parts if p)
                           for name, parts in sections.items()})


def _dedent(lines: list[str]) -> list[str]:
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return [line[cut:].rstrip() for line in lines]


# The texts as declared, parsed into sections on first read: a scan registers some sixty rules
# and reads none of their documentation.
_TEXTS: dict[str, str] = {}
_DOCS: dict[str, Doc] = {}


def document(finding_id: str, producer: str, text: str | None) -> None:
    """Declare the documentation of ``finding_id`` (a docstring, indented or not): only its
    documenting producer (the first it lists) does, once. The text is parsed when it is read
    (:func:`doc_of`), which refuses a text without a summary and an explanation."""
    spec = CATALOGUE.get(finding_id)
    if spec is None or spec.producer != producer:
        raise CatalogueError(f"{producer} documents {finding_id!r}, which the catalogue gives "
                             f"to {spec.producer if spec else 'no producer'}")
    text = text or ""
    if _TEXTS.get(finding_id, text) != text:
        raise CatalogueError(f"{finding_id!r} is documented twice")
    _TEXTS[finding_id] = text


def doc_of(finding_id: str) -> Doc | None:
    """The declared documentation of ``finding_id`` (None until its producer is imported)."""
    doc = _DOCS.get(finding_id)
    if doc is None and finding_id in _TEXTS:
        import inspect  # here: a scan never reads a finding's documentation

        doc = parse_doc(inspect.cleandoc(_TEXTS[finding_id]))
        if not doc.summary or not (doc.meaning or doc.why):
            raise CatalogueError(f"{finding_id!r} needs a summary line and a paragraph below it")
        _DOCS[finding_id] = doc
    return doc
