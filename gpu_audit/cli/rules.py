"""``gpu-audit rules [ID]``: every finding id of every producer, explain's signatures, and
their documentation.

Everything is read from the finding catalogue (:mod:`gpu_audit.knowledge.findings`): ids,
producers, severities, lifecycles and settings, and the documentation each producer declares
into it when it is imported (:func:`load_catalogue`). Numbers a text quotes from a setting's
default are filled from that default's one declaration (:func:`doc_values`). The same text
renders the terminal, ``--json``, ``--markdown`` (``docs/rules.md``) and ``--pages DIR`` (one
page per id, ``docs/findings/``).
"""

from __future__ import annotations

import difflib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

import msgspec

from gpu_audit import __version__
from gpu_audit.cli.declared import Option, command, json_option
from gpu_audit.errors import UsageError
from gpu_audit.knowledge import findings as catalogue
from gpu_audit.knowledge.findings import Doc, FindingSpec
from gpu_audit.model import Severity
from gpu_audit.units import utc_now

if TYPE_CHECKING:
    from gpu_audit.explain.signatures import ClassDoc, Signature

# Section titles for the rule modules, in RULE_MODULES order; others use their docstring.
SECTION_TITLES = {
    "gpu_audit.rules.nvml": "NVML and the driver",
    "gpu_audit.rules.host": "Host",
    "gpu_audit.rules.gpu": "GPU memory",
    "gpu_audit.rules.processes": "GPU processes",
    "gpu_audit.rules.allocator_live": "Running PyTorch processes",
    "gpu_audit.rules.allocator": "Allocator configuration",
    "gpu_audit.rules.environment": "Environment variables",
    "gpu_audit.rules.software": "Software compatibility",
    "gpu_audit.rules.health": "Hardware health",
    "gpu_audit.rules.unsupported": "Hardware health",
    "gpu_audit.fleet.rules": "Fleet (gpu-audit fleet and merge)",
    "gpu_audit.fleet.outliers": "Fleet (gpu-audit fleet and merge)",
    "gpu_audit.diff.rules": "Before and after a job (gpu-audit diff)",
}
CHECK_SECTION = "Checks (gpu-audit check)"
EXPLAIN_SECTION = "Explain failure classes (gpu-audit explain)"
SECTION_NAMES = {"why": "Why it matters", "example": "Example", "fix": "Fix"}

PAGE_INTRO = """\
# Finding reference

Every id `gpu-audit scan`, `gpu-audit check`, `gpu-audit validate`, `gpu-audit diag`, the fleet
commands (`gpu-audit fleet`, `gpu-audit merge`), `gpu-audit diff` and `gpu-audit explain` can
report: its producer, its lifecycle, its default severity and what it means. A rule may raise
or lower the severity of one finding where its text says so. Ignore any of these ids with
`ignore = ["id", ...]` under `[tool.gpu-audit]`; `--fail-on SEVERITY` sets the severity that
fails the run. One page per id is in [findings/](findings/README.md).

The second part lists the failure classes and message signatures `gpu-audit explain`
recognises in logs.

This page is generated from the finding catalogue (`gpu_audit/knowledge/findings.py`), the
producers' docstrings and explain's signature catalogue by `gpu-audit rules --markdown`; edit
those, not this page. `gpu-audit rules ID` prints one entry (a finding id, a check, an explain
class or an explain signature) in a terminal.
"""


Object = dict[str, Any]


# An id's documentation in the document: the catalogue's sections (``Doc``), every one present.
RuleSections = msgspec.defstruct("RuleSections", [(name, str) for name in Doc.__struct_fields__],
                                 module=__name__)


class RuleEntry(msgspec.Struct):
    id: str
    severity: Severity | None  # checks and explain classes have none
    section: str
    summary: str
    doc: str
    producers: list[str]
    lifecycle: Literal[catalogue.LIFECYCLES]  # type: ignore[valid-type]
    redirect: str | None
    settings: list[str]
    sections: RuleSections  # type: ignore[valid-type]
    # A fault of the machine, not of the workload: a scheduler hook drains the node for it.
    node_problem: bool = False


class RulesDocument(msgspec.Struct):
    """The ``gpu-audit.rules/1`` document (``rules --json``)."""

    schema: str
    tool_version: str
    generated_at: str
    rules: list[RuleEntry]
    explain: list[Object]


@dataclass(frozen=True)
class Entry:
    """One catalogue id as the reference shows it: its declaration, its rendered
    documentation and the section it is listed under."""

    spec: FindingSpec
    sections: Doc
    section: str

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def severity(self) -> Severity | None:
        return self.spec.severity

    @property
    def severity_text(self) -> str:
        return self.severity.value if self.severity else "-"

    @property
    def summary(self) -> str:
        return self.sections.summary

    @property
    def doc(self) -> str:
        """The whole text: summary, meaning, then each further section under its name."""
        parts = [self.sections.summary, self.sections.meaning]
        for name, title in SECTION_NAMES.items():
            if text := getattr(self.sections, name):
                parts.append(f"{title}: {text}")
        if self.spec.settings:
            parts.append("Settings: " + ", ".join(self.settings_text()))
        return "\n\n".join(p for p in parts if p)

    def settings_text(self) -> list[str]:
        values = doc_values()
        return [f"`{key}` (default {values[key]})" if key in values else f"`{key}`"
                for key in self.spec.settings]


Explained = Union["ClassDoc", "Signature", None]  # an explain class or signature


def load_catalogue() -> None:
    """Import every producer, so that each declares its ids' documentation."""
    from gpu_audit.check.registry import all_checks
    from gpu_audit.diag import catalogue as diag_catalogue  # noqa: F401 (declares its docs)
    from gpu_audit.diff import all_diff_rules
    from gpu_audit.explain import signatures  # noqa: F401 (declares the classes' docs)
    from gpu_audit.fleet.registry import all_fleet_rules
    from gpu_audit.rules import all_rules
    from gpu_audit.validate import catalogue as validate_catalogue  # noqa: F401

    all_rules(), all_checks(), all_fleet_rules(), all_diff_rules()


def _setting_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "unset"
    if isinstance(value, list):
        return "[]" if not value else ", ".join(map(str, value))
    return str(value)


def doc_values() -> dict[str, str]:
    """What a ``{name}`` in a finding's documentation stands for: every policy key's default
    (``Policy``, ``CheckPolicy``), and the figures validate and diag judge with, each read from
    its one declaration."""
    from gpu_audit.config import CheckPolicy
    from gpu_audit.config.policy import NOT_KEYS
    from gpu_audit.diag.sustain import DECAY_BOUND, POWER_CAP_SHARE
    from gpu_audit.knowledge.allocator.limits import FRAGMENTATION_MIN_BYTES
    from gpu_audit.knowledge.allocator.variables import (
        deprecation_alias_release,
        deprecation_warning_releases,
    )
    from gpu_audit.knowledge.gpu_models import LOW_FRACTION, METHOD_EFFICIENCY, PEER_FRACTION
    from gpu_audit.validate.gates import DRIFT_MIN_CYCLES

    values = {f.name: _setting_text(f.default if f.default is not msgspec.NODEFAULT
                                    else f.default_factory())
              for f in msgspec.structs.fields(CheckPolicy) if f.name not in NOT_KEYS}
    figures = {"low_fraction_pct": LOW_FRACTION, "peer_fraction_pct": PEER_FRACTION,
               "matmul_share_pct": METHOD_EFFICIENCY["matmul"], "decay_bound_pct": DECAY_BOUND,
               "power_cap_share_pct": POWER_CAP_SHARE}
    values.update({name: f"{100 * share:g}" for name, share in figures.items()})
    values["drift_min_cycles"] = str(DRIFT_MIN_CYCLES)
    values["alloc_conf_warning_releases"] = deprecation_warning_releases()
    values["alloc_conf_alias_release"] = deprecation_alias_release()
    values["fragmentation_min_mib"] = f"{FRAGMENTATION_MIN_BYTES / 2**20:g}"
    return values


def _registered_module(spec: FindingSpec) -> str | None:
    """The module of the scan, fleet or diff rule that documents ``spec``'s id."""
    from gpu_audit.diff import all_diff_rules
    from gpu_audit.fleet.registry import all_fleet_rules
    from gpu_audit.rules import all_rules

    registry = {catalogue.SCAN: all_rules, catalogue.FLEET: all_fleet_rules,
                catalogue.DIFF: all_diff_rules}.get(spec.producer)
    return registry()[spec.id].func.__module__ if registry else None


def section_of(spec: FindingSpec) -> str:
    from gpu_audit.diag.catalogue import SECTION as DIAG_SECTION
    from gpu_audit.validate.catalogue import SECTION as VALIDATE_SECTION

    fixed = {catalogue.CHECK: CHECK_SECTION, catalogue.VALIDATE: VALIDATE_SECTION,
             catalogue.DIAG: DIAG_SECTION, catalogue.EXPLAIN: EXPLAIN_SECTION}
    if spec.producer in fixed:
        return fixed[spec.producer]
    module = _registered_module(spec) or ""
    if module in SECTION_TITLES:
        return SECTION_TITLES[module]
    doc = inspect.getdoc(sys.modules.get(module)) or module
    return doc.split("\n", 1)[0].rstrip(".")


def all_entries() -> dict[str, Entry]:
    """Every catalogue id with its rendered documentation (a deprecated id shows the text of
    the id it redirects to)."""
    load_catalogue()
    values = doc_values()
    entries = {}
    for spec in catalogue.CATALOGUE.values():
        target = catalogue.CATALOGUE[spec.redirect] if spec.deprecated else spec
        doc = catalogue.doc_of(target.id)
        if doc is None:
            raise UsageError(f"{target.id!r} has no documentation")
        entries[spec.id] = Entry(spec, doc.render(values), section_of(target))
    return entries


def grouped(rules: dict[str, Entry]) -> list[tuple[str, list[Entry]]]:
    """(section title, entries sorted by id): the scan rules' sections in registry order, then
    the other producers' in the catalogue's producer order."""
    from gpu_audit.rules import RULE_MODULES

    order = {m: i for i, m in enumerate(RULE_MODULES)}
    producer_rank = {p: i for i, p in enumerate(catalogue.PRODUCERS)}

    def rank(entry: Entry) -> tuple[int, int, str]:
        module = _registered_module(entry.spec) if entry.spec.producer == catalogue.SCAN else None
        return (producer_rank[entry.spec.producer], order.get(module or "", 0), entry.id)

    sections: dict[str, list[Entry]] = {}
    for entry in sorted(rules.values(), key=rank):
        sections.setdefault(entry.section, []).append(entry)
    return list(sections.items())


def _lifecycle_text(entry: Entry) -> str:
    spec = entry.spec
    return f"deprecated -> {spec.redirect}" if spec.deprecated else spec.lifecycle


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _explain_link(entry: Entry) -> str:
    from gpu_audit.explain.reference import anchor

    return f"#{anchor(f'Class `{entry.id}`')}"


def _markdown_sections(entry: Entry, level: str) -> list[str]:
    spec = entry.spec
    lines = [f"{level} `{entry.id}`", "",
             f"**Severity:** {entry.severity_text} · **producer:** {', '.join(spec.producers)} · "
             f"**lifecycle:** {_lifecycle_text(entry)}", "", entry.summary]
    if spec.deprecated:
        lines += ["", f"Deprecated: use [`{spec.redirect}`](#{spec.redirect}) instead."]
    if entry.sections.meaning:
        lines += ["", entry.sections.meaning]
    for name, title in SECTION_NAMES.items():
        if text := getattr(entry.sections, name):
            lines += ["", f"**{title}:** {text}"]
    if spec.settings:
        lines += ["", "**Settings:** " + ", ".join(entry.settings_text())]
    return lines


def render_markdown(rules: dict[str, Entry]) -> str:
    """The reference page: an index table, then one entry per id, grouped by section (explain's
    classes are described in the explain part, which the table links to)."""
    lines = [PAGE_INTRO, "| id | producer | lifecycle | severity | summary |",
             "|---|---|---|---|---|"]
    sections = grouped(rules)
    for _, members in sections:
        for r in members:
            link = _explain_link(r) if r.spec.producers == (catalogue.EXPLAIN,) else f"#{r.id}"
            lines.append(f"| [`{r.id}`]({link}) | {', '.join(r.spec.producers)} | "
                         f"{_lifecycle_text(r)} | {r.severity_text} | {_cell(r.summary)} |")
    for title, members in sections:
        shown = [r for r in members if r.spec.producers != (catalogue.EXPLAIN,)]
        if not shown:
            continue
        lines += ["", f"## {title}"]
        for r in shown:
            lines += ["", *_markdown_sections(r, "###")]
    return "\n".join(lines) + "\n"


def render_list(rules: dict[str, Entry], columns: int | None = None) -> str:
    """One row per id; a summary longer than the terminal's room wraps under its column (or,
    on a very narrow terminal, below the row), between words."""
    import shutil
    import textwrap

    columns = columns or shutil.get_terminal_size((200, 24)).columns
    width = max((len(r.id) for r in rules.values()), default=10) + 2
    lines = [f"{'ID':<{width}}{'PRODUCER':<16}{'LIFECYCLE':<12}{'SEVERITY':<10}SUMMARY"]
    for _, members in grouped(rules):
        for r in members:
            head = (f"{r.id:<{width}}{','.join(r.spec.producers):<16}"
                    f"{r.spec.lifecycle:<12}{r.severity_text:<10}")
            room = columns - len(head) - 1
            if len(r.summary) <= room:
                lines.append(head + r.summary)
            elif room >= max([30, *(len(word) for word in r.summary.split())]):
                wrapped = textwrap.wrap(r.summary, room, break_on_hyphens=False,
                                        break_long_words=False)
                lines.append(head + wrapped[0])
                lines.extend(" " * len(head) + part for part in wrapped[1:])
            else:
                lines.append(head.rstrip())
                lines.extend(textwrap.wrap(r.summary, columns - 1, initial_indent="    ",
                                           subsequent_indent="    ", break_on_hyphens=False,
                                           break_long_words=False))
    return "\n".join(lines) + "\n"


def render_one(entry: Entry) -> str:
    spec = entry.spec
    head = f"{entry.id} ({entry.severity_text}) - {entry.section}"
    meta = f"producer: {', '.join(spec.producers)}; lifecycle: {_lifecycle_text(entry)}"
    if spec.deprecated:
        meta += f"\n{entry.id!r} is deprecated: it is now {spec.redirect!r} (shown below)"
    return f"{head}\n{meta}\n\n{entry.doc}\n"


def render_page() -> str:
    """docs/rules.md: every finding, then explain's classes and signatures."""
    from gpu_audit.explain import reference

    return render_markdown(all_entries()) + "\n" + reference.render_markdown()


PAGES_INTRO = """\
# Findings, one page per id

Generated by `gpu-audit rules --pages docs/findings` from the finding catalogue; edit the
catalogue (`gpu_audit/knowledge/findings.py`) and the producers' docstrings, not these pages.
The whole reference is one page too: [rules.md](../rules.md).
"""


def render_pages() -> dict[str, str]:
    """docs/findings/: one page per id (``<id>.md``) and an index (``README.md``)."""
    from gpu_audit.explain import reference

    rules = all_entries()
    pages: dict[str, str] = {}
    index = [PAGES_INTRO, "| id | producer | lifecycle | severity | summary |",
             "|---|---|---|---|---|"]
    for title, members in grouped(rules):
        for r in members:
            index.append(f"| [`{r.id}`]({r.id}.md) | {', '.join(r.spec.producers)} | "
                         f"{_lifecycle_text(r)} | {r.severity_text} | {_cell(r.summary)} |")
            body = _markdown_sections(r, "#")
            body[0] = f"# `{r.id}`"
            body += ["", f"Listed under: {title}. All findings: [index](README.md)."]
            explained = reference.find(r.id) if catalogue.EXPLAIN in r.spec.producers else None
            if explained is not None:
                body += ["", "## Signatures (gpu-audit explain)", "",
                         *(f"- `{sig.id}` ({reference.severity_text(sig)}): {sig.title}"
                           for sig in reference.signatures_of(r.id))]
            pages[f"{r.id}.md"] = "\n".join(body) + "\n"
    pages["README.md"] = "\n".join(index) + "\n"
    return pages


def write_pages(folder: Path) -> int:
    """Write :func:`render_pages` into ``folder``, removing pages of ids that no longer exist."""
    pages = render_pages()
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        (folder / name).write_text(text)
    return len(pages)


def rules_document(rules: dict[str, Entry],
                   explained: list[dict[str, object]] | None = None) -> RulesDocument:
    return RulesDocument(
        schema="gpu-audit.rules/1",
        tool_version=__version__,
        generated_at=utc_now(),
        rules=[RuleEntry(id=r.id, severity=r.severity, section=title, summary=r.summary,
                         doc=r.doc, producers=list(r.spec.producers), lifecycle=r.spec.lifecycle,
                         redirect=r.spec.redirect, settings=list(r.spec.settings),
                         node_problem=r.spec.node_problem,
                         sections=RuleSections(**msgspec.structs.asdict(r.sections)))
               for title, members in grouped(rules) for r in members],
        explain=explained or [],
    )


def find_rule(rules: dict[str, Entry], rule_id: str) -> tuple[dict[str, Entry], Explained]:
    """The finding and/or the explain class or signature named ``rule_id``.

    ``nvml-unavailable`` is both a finding and an explain class: both are returned. Nothing by
    that name is a :class:`UsageError` that suggests the closest names.
    """
    from gpu_audit.explain import reference

    found = {rule_id: rules[rule_id]} if rule_id in rules else {}
    if rule_id in rules and rules[rule_id].spec.deprecated:
        redirect = rules[rule_id].spec.redirect
        assert redirect is not None
        found[redirect] = rules[redirect]
    explained = reference.find(rule_id)
    if found or explained is not None:
        return found, explained
    known = [*rules, *reference.names()]
    close = difflib.get_close_matches(rule_id.lower(), known, n=3, cutoff=0.5)
    hint = (" (did you mean " + " or ".join(repr(c) for c in close) + "?)" if close
            else "; `gpu-audit rules` lists them all")
    raise UsageError(f"no finding id, check, explain class or signature {rule_id!r}{hint}")


OPTIONS = (
    Option("rule_id", "[ID]", str, argument=True, metavar="[ID]",
           help="Show this finding, check, explain class or signature in full."),
    json_option("the list", "gpu-audit.rules/1"),
    Option("markdown", "--markdown", bool, False,
           help="Print the reference page (docs/rules.md) as Markdown."),
    Option("pages", "--pages", Path, metavar="DIR",
           help="Write one Markdown page per id and an index into DIR (docs/findings)."),
)


@command("rules", OPTIONS)
def rules_command(*, rule_id: str | None, json_out: bool, markdown: bool,
                  pages: Path | None) -> int:
    """List every finding id and explain signature with its meaning, or show one in full."""
    from gpu_audit.explain import reference
    from gpu_audit.serial import dumps

    if json_out and markdown:
        raise UsageError("--json and --markdown cannot be combined")
    if pages is not None:
        if rule_id is not None or json_out or markdown:
            raise UsageError("--pages writes every id's page; it takes no ID, --json or "
                             "--markdown")
        count = write_pages(pages)
        sys.stdout.write(f"wrote {count} pages to {pages}\n")
        return 0
    rules = all_entries()
    if rule_id is None:
        if json_out:
            sys.stdout.write(dumps(rules_document(rules, reference.document())) + "\n")
        elif markdown:
            sys.stdout.write(render_page())
        else:
            sys.stdout.write(render_list(rules) + "\n" + reference.render_list())
        return 0
    found, explained = find_rule(rules, rule_id)
    if (renamed := reference.RENAMED.get(rule_id)) is not None:
        sys.stderr.write(f"{rule_id!r} was renamed: it is now {renamed!r}\n")
    if json_out:
        extra = reference.document(explained) if explained is not None else []
        sys.stdout.write(dumps(rules_document(found, extra)) + "\n")
    elif markdown:
        parts = [render_markdown(found)] if found else []
        if explained is not None:
            parts.append(reference.render_markdown(explained))
        sys.stdout.write("\n".join(parts))
    else:
        parts = [render_one(entry) for entry in found.values()]
        if explained is not None:
            documented_here = (rule_id in found
                               and found[rule_id].spec.producer == catalogue.EXPLAIN)
            parts.append(reference.render_signature_list(rule_id) if documented_here
                         else reference.render_one(explained))
        sys.stdout.write("\n".join(parts))
    return 0
