"""``gpu-audit rules [ID]``: every finding id and explain signature, and their documentation.

The text comes from the rules' docstrings and from explain's signature catalogue, the same text
``--markdown`` renders into ``docs/rules.md`` (``gpu-audit rules --markdown > docs/rules.md``
regenerates the page).
"""

from __future__ import annotations

import difflib
import inspect
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from gpu_audit import __version__
from gpu_audit.cli.declared import Option, command, json_option
from gpu_audit.errors import UsageError
from gpu_audit.model import Severity
from gpu_audit.units import utc_now

if TYPE_CHECKING:
    from gpu_audit.explain.signatures import ClassDoc, Signature
    from gpu_audit.rules import Rule

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

PAGE_INTRO = """\
# Finding reference

Every finding `gpu-audit scan`, `gpu-audit check`, `gpu-audit validate`, the fleet commands
(`gpu-audit fleet`, `gpu-audit merge`) and `gpu-audit diff` can report: its id, its default
severity and what it means. A rule may raise or lower the severity of one finding where its
text says so. Ignore a scan or check id with `ignore = ["id", ...]` under `[tool.gpu-audit]`;
`--fail-on SEVERITY` sets the severity that fails the run.

The second part lists the failure classes and message signatures `gpu-audit explain`
recognises in logs.

This page is generated from the rules' docstrings and explain's signature catalogue by
`gpu-audit rules --markdown`; edit those, not this page. `gpu-audit rules ID` prints one entry
(a finding id, an explain class or an explain signature) in a terminal.
"""


@dataclass(frozen=True)
class CatalogueEntry:
    """A finding emitted outside the scan rules (by `validate`), documented the same way."""

    id: str
    severity: Severity
    doc: str
    section: str

    @property
    def summary(self) -> str:
        return self.doc.split("\n", 1)[0].strip()


Entry = Union["Rule", CatalogueEntry]
Explained = Union["ClassDoc", "Signature", None]  # an explain class or signature


def all_entries() -> dict[str, Entry]:
    """The scan rules, then validate's findings (an id both use keeps the scan rule's text),
    then the fleet rules, then diff's."""
    from gpu_audit.diff import all_diff_rules
    from gpu_audit.fleet.registry import all_fleet_rules
    from gpu_audit.rules import all_rules
    from gpu_audit.validate.catalogue import SECTION, VALIDATION_FINDINGS

    entries: dict[str, Entry] = dict(all_rules())
    for finding_id, (severity, doc) in VALIDATION_FINDINGS.items():
        entries.setdefault(finding_id, CatalogueEntry(finding_id, severity, doc, SECTION))
    for finding_id, fleet_rule in all_fleet_rules().items():
        entries.setdefault(finding_id, fleet_rule)
    for finding_id, diff_rule in all_diff_rules().items():
        entries.setdefault(finding_id, diff_rule)
    from gpu_audit.diag.catalogue import DIAG_FINDINGS
    from gpu_audit.diag.catalogue import SECTION as DIAG_SECTION

    for finding_id, (severity, doc) in DIAG_FINDINGS.items():
        entries.setdefault(finding_id, CatalogueEntry(finding_id, severity, doc, DIAG_SECTION))
    return entries


def _module(entry: Entry) -> str | None:
    return entry.func.__module__ if hasattr(entry, "func") else None


def section_of(rule_obj: Entry) -> str:
    if isinstance(rule_obj, CatalogueEntry):
        return rule_obj.section
    module = rule_obj.func.__module__
    if module in SECTION_TITLES:
        return SECTION_TITLES[module]
    doc = inspect.getdoc(sys.modules.get(module)) or module
    return doc.split("\n", 1)[0].rstrip(".")


def grouped(rules: dict[str, Entry]) -> list[tuple[str, list[Entry]]]:
    """(section title, rules sorted by id), sections in registry order."""
    from gpu_audit.rules import RULE_MODULES

    order = {m: i for i, m in enumerate(RULE_MODULES)}
    sections: dict[str, list[Entry]] = {}
    for rule_obj in sorted(rules.values(),
                           key=lambda r: (order.get(_module(r), len(order)), r.id)):
        sections.setdefault(section_of(rule_obj), []).append(rule_obj)
    return list(sections.items())


def _body(rule_obj: Entry) -> str:
    """The docstring after its summary line."""
    return rule_obj.doc.partition("\n")[2].strip()


def render_markdown(rules: dict[str, Entry]) -> str:
    """The reference page: an index table, then one entry per rule, grouped by section."""
    lines = [PAGE_INTRO, "| id | severity | summary |", "|---|---|---|"]
    sections = grouped(rules)
    for _, members in sections:
        for r in members:
            summary = r.summary.replace("|", "\\|")
            lines.append(f"| [`{r.id}`](#{r.id}) | {r.severity.value} | {summary} |")
    for title, members in sections:
        lines += ["", f"## {title}"]
        for r in members:
            lines += ["", f"### `{r.id}`", "", f"**Severity:** {r.severity.value}", "",
                      r.summary]
            if body := _body(r):
                lines += ["", body]
    return "\n".join(lines) + "\n"


def render_list(rules: dict[str, Entry]) -> str:
    width = max((len(r.id) for r in rules.values()), default=10) + 2
    lines = [f"{'ID':<{width}}{'SEVERITY':<10}SUMMARY"]
    for _, members in grouped(rules):
        for r in members:
            lines.append(f"{r.id:<{width}}{r.severity.value:<10}{r.summary}")
    return "\n".join(lines) + "\n"


def render_one(rule_obj: Entry) -> str:
    head = f"{rule_obj.id} ({rule_obj.severity.value}) - {section_of(rule_obj)}"
    return f"{head}\n\n{rule_obj.doc}\n"


def render_page() -> str:
    """docs/rules.md: every finding, then explain's classes and signatures."""
    from gpu_audit.explain import reference

    return render_markdown(all_entries()) + "\n" + reference.render_markdown()


def rules_document(rules: dict[str, Entry],
                   explained: list[dict[str, object]] | None = None) -> dict[str, object]:
    stamp = utc_now()
    return {
        "schema": "gpu-audit.rules/1",
        "tool_version": __version__,
        "generated_at": stamp,
        "rules": [
            {"id": r.id, "severity": r.severity.value, "section": title, "summary": r.summary,
             "doc": r.doc}
            for title, members in grouped(rules) for r in members
        ],
        "explain": explained or [],
    }


def find_rule(rules: dict[str, Entry], rule_id: str) -> tuple[dict[str, Entry], Explained]:
    """The finding and/or the explain class or signature named ``rule_id``.

    ``nvml-unavailable`` is both a finding and an explain class: both are returned. Nothing by
    that name is a :class:`UsageError` that suggests the closest name.
    """
    from gpu_audit.explain import reference

    found = {rule_id: rules[rule_id]} if rule_id in rules else {}
    explained = reference.find(rule_id)
    if found or explained is not None:
        return found, explained
    known = [*rules, *reference.names()]
    close = difflib.get_close_matches(rule_id.lower(), known, n=1, cutoff=0.5)
    hint = (f" (did you mean {close[0]!r}?)" if close
            else "; `gpu-audit rules` lists them all")
    raise UsageError(f"no finding id, explain class or signature {rule_id!r}{hint}")


OPTIONS = (
    Option("rule_id", "[ID]", str, argument=True, metavar="[ID]",
           help="Show this finding, explain class or signature in full."),
    json_option("the list", "gpu-audit.rules/1"),
    Option("markdown", "--markdown", bool, False,
           help="Print the reference page (docs/rules.md) as Markdown."),
)


@command("rules", OPTIONS)
def rules_command(*, rule_id: str | None, json_out: bool, markdown: bool) -> int:
    """List every finding id and explain signature with its meaning, or show one in full."""
    from gpu_audit.explain import reference
    from gpu_audit.serial import dumps

    if json_out and markdown:
        raise UsageError("--json and --markdown cannot be combined")
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
            parts.append(reference.render_one(explained))
        sys.stdout.write("\n".join(parts))
    return 0
