"""The finding catalogue: one declaration per id, every producer registered against it, docs
whose quoted defaults come from their declarations, and ``ignore`` that accepts exactly its ids."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from gpu_audit.cli import rules as rules_cli
from gpu_audit.config import CheckPolicy, Policy, load_check_policy, load_policy
from gpu_audit.errors import ConfigError
from gpu_audit.knowledge import findings as catalogue
from gpu_audit.knowledge.findings import CatalogueError, FindingSpec, ignorable

REPO = Path(__file__).resolve().parents[2]
PAGES = REPO / "docs" / "findings"


def registered() -> dict[str, set[str]]:
    """Producer -> the ids its registry (or documentation table) holds."""
    from gpu_audit.check.registry import all_checks
    from gpu_audit.diag.catalogue import DIAG_DOCS
    from gpu_audit.diff import all_diff_rules
    from gpu_audit.explain.signatures import CLASS_DOCS
    from gpu_audit.fleet.registry import all_fleet_rules
    from gpu_audit.rules import all_rules
    from gpu_audit.validate.catalogue import VALIDATION_DOCS

    return {catalogue.SCAN: set(all_rules()), catalogue.CHECK: set(all_checks()),
            catalogue.VALIDATE: set(VALIDATION_DOCS), catalogue.DIAG: set(DIAG_DOCS),
            catalogue.FLEET: set(all_fleet_rules()), catalogue.DIFF: set(all_diff_rules()),
            catalogue.EXPLAIN: set(CLASS_DOCS)}


def test_every_registered_id_is_catalogued_and_every_current_id_registered():
    held = registered()
    for producer in catalogue.PRODUCERS:
        declared = set(catalogue.ids(producer, current=True))
        assert held[producer] - declared == set(), f"{producer} registers uncatalogued ids"
        assert declared - held[producer] == set(), f"catalogue lists ids {producer} lacks"


def test_every_id_is_kebab_case_once_with_known_producers_and_documented():
    rules_cli.load_catalogue()
    assert len(catalogue.CATALOGUE) == len(catalogue._ENTRIES)  # no id declared twice
    for spec in catalogue.CATALOGUE.values():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", spec.id)
        assert set(spec.producers) <= set(catalogue.PRODUCERS)
        assert spec.lifecycle in catalogue.LIFECYCLES
        assert spec.deprecated or catalogue.doc_of(spec.id) is not None, spec.id


def entry(finding_id: str, **changes) -> FindingSpec:
    return msgspec.structs.replace(FindingSpec(finding_id, (catalogue.SCAN,), catalogue.WARNING),
                               **changes)


@pytest.mark.parametrize(("entries", "message"), [
    ([entry("swap-pressure"), entry("swap-pressure")], "declared twice"),
    ([entry("Swap_Pressure")], "kebab-case"),
    ([entry("a-b", producers=("scanner",))], "producers"),
    ([entry("a-b", lifecycle="retired")], "lifecycle"),
    ([entry("a-b", lifecycle="deprecated")], "redirect"),
    ([entry("a-b", redirect="c-d")], "redirect"),
    ([entry("a-b", lifecycle="deprecated", redirect="c-d")], "not a current id"),
])
def test_a_broken_table_is_refused(entries, message):
    with pytest.raises(CatalogueError, match=message):
        catalogue._validated(entries)


def test_a_producer_cannot_register_an_id_the_catalogue_lacks():
    from gpu_audit.rules.registry import SCAN_RULES

    with pytest.raises(CatalogueError, match="not in the finding catalogue"):
        SCAN_RULES.rule("no-such-finding")
    with pytest.raises(CatalogueError, match="under that producer"):
        SCAN_RULES.rule("free-vram")  # a check's id, not a scan rule's
    with pytest.raises(CatalogueError, match="documents"):
        catalogue.document("free-vram", catalogue.SCAN, "Summary.\n\nBody.")


def test_producers_take_their_severity_from_the_catalogue():
    from gpu_audit.fleet.registry import all_fleet_rules
    from gpu_audit.rules import all_rules

    for rule in [*all_rules().values(), *all_fleet_rules().values()]:
        assert rule.severity is catalogue.severity_of(rule.id)


# --- documentation ---------------------------------------------------------------------------

def test_doc_sections_are_parsed_from_labelled_paragraphs():
    doc = catalogue.parse_doc("Summary.\n\n    What.\n\n    Why it matters: because.\n\n"
                              "    Fix: do it.\n    Really.\n\n    Example: `x`")
    assert doc == catalogue.Doc("Summary.", "What.", "because.", "`x`", "do it.\nReally.")


def test_quoted_defaults_are_the_declared_ones():
    values = rules_cli.doc_values()
    assert values["max_swap_used_gib"] == f"{Policy().max_swap_used_gib:g}"
    assert values["min_host_available_pct"] == f"{Policy().min_host_available_pct:g}"
    assert values["own_processes"] == CheckPolicy().own_processes
    entries = rules_cli.all_entries()
    assert f"({Policy().max_swap_used_gib:g} GiB by default)" in entries["swap-pressure"].summary
    assert "`max_swap_used_gib` (default 2)" in entries["swap-pressure"].doc
    assert "{" not in "".join(e.doc for e in entries.values())


def test_a_changed_default_changes_the_rendered_doc(monkeypatch):
    real = rules_cli.doc_values()
    monkeypatch.setattr(rules_cli, "doc_values", lambda: {**real, "max_swap_used_gib": "7.5"})
    entries = rules_cli.all_entries()
    assert "(7.5 GiB by default)" in entries["swap-pressure"].summary
    assert "(7.5 GiB by default)" in entries["stage-swap-pressure"].summary


def test_no_doc_retypes_a_default():
    rules_cli.load_catalogue()
    retyped = re.compile(r"\d+(\.\d+)?\s*(%|GiB|MiB|C)? by default")
    for finding_id in catalogue.CATALOGUE:
        doc = catalogue.doc_of(finding_id)
        text = " ".join(msgspec.structs.astuple(doc)) if doc else ""
        assert not retyped.search(" ".join(text.split())), finding_id


def test_an_unknown_placeholder_is_refused():
    with pytest.raises(CatalogueError, match="no declared default"):
        catalogue.parse_doc("Over {no_such_key} GiB.\n\nBody.").render({})


def test_generated_pages_are_current():
    pages = rules_cli.render_pages()
    on_disk = {p.name: p.read_text() for p in PAGES.glob("*.md")}
    assert set(on_disk) == set(pages), "run `gpu-audit rules --pages docs/findings`"
    stale = [name for name, text in pages.items() if on_disk[name] != text]
    assert not stale, f"run `gpu-audit rules --pages docs/findings` ({stale[:3]} are stale)"
    assert set(pages) == {f"{i}.md" for i in catalogue.CATALOGUE} | {"README.md"}


# Every stable id is documented in every section, ruff-style: what it means, why it matters,
# what it looks like (a finding's title and evidence, a check's result line, a failure class's
# log line) and how to fix it.
@pytest.mark.parametrize("finding_id", [
    spec.id for spec in catalogue.CATALOGUE.values() if spec.lifecycle == catalogue.STABLE])
def test_every_stable_id_says_why_it_matters_how_it_looks_and_how_to_fix_it(finding_id):
    rules_cli.load_catalogue()
    doc = catalogue.doc_of(finding_id)
    assert doc is not None, finding_id
    assert doc.meaning and doc.why and doc.example and doc.fix, (
        f"{finding_id}: its documentation needs a meaning paragraph and `Why it matters:`, "
        "`Example:` and `Fix:` paragraphs")


# --- gpu-audit rules ---------------------------------------------------------------------------

def rules(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", "rules", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_rules_explains_a_check_and_an_explain_class(cli_env):
    check = rules(["free-vram"], cli_env)
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("free-vram (-) - Checks (gpu-audit check)")
    assert "producer: check; lifecycle: stable" in check.stdout
    assert f"`min_free_vram_pct` (default {Policy().min_free_vram_pct:g})" in check.stdout
    explained = rules(["cuda-oom"], cli_env)
    assert explained.returncode == 0, explained.stderr
    assert "producer: explain" in explained.stdout
    assert "cuda-oom/caching-allocator" in explained.stdout


def test_rules_lists_every_id_with_producer_and_lifecycle(cli_env):
    listing = rules([], cli_env).stdout.partition("\n\n")[0].splitlines()
    rows = {line.split()[0]: line.split()[1:3] for line in listing[1:]}
    assert set(rows) == set(catalogue.CATALOGUE)
    assert rows["free-vram"] == ["check", "stable"]
    assert rows["unattributed-vram"] == ["scan,check", "stable"]
    assert rows["cuda-oom"] == ["explain", "stable"]


def test_unknown_id_suggests_close_ids(cli_env):
    result = rules(["free-vrm"], cli_env)
    assert result.returncode == 3 and result.stdout == ""
    assert "did you mean 'free-vram'" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def deprecated(monkeypatch):
    """The catalogue with ``old-swap`` deprecated in favour of ``swap-pressure``."""
    old = entry("old-swap", lifecycle="deprecated", redirect="swap-pressure")
    table = catalogue._validated([*catalogue.CATALOGUE.values(), old])
    monkeypatch.setattr(catalogue, "CATALOGUE", table)
    return old


def test_a_deprecated_id_is_explained_as_its_redirect(deprecated):
    entries = rules_cli.all_entries()
    found, _ = rules_cli.find_rule(entries, "old-swap")
    assert list(found) == ["old-swap", "swap-pressure"]
    text = rules_cli.render_one(found["old-swap"])
    assert "deprecated -> swap-pressure" in text and "it is now 'swap-pressure'" in text
    assert catalogue.resolve("old-swap") == (
        "swap-pressure", "'old-swap' is deprecated: it is now 'swap-pressure'")


# --- ignore ------------------------------------------------------------------------------------

def test_ignore_accepts_every_catalogue_id(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text('ignore = ["free-vram", "cuda-oom", "diag-memory-error", "fleet-cuda-skew"]\n')
    policy = load_policy(path, environ={}, known_ids=ignorable)
    assert policy.ignore == ["free-vram", "cuda-oom", "diag-memory-error", "fleet-cuda-skew"]


def test_ignore_refuses_an_unknown_id_where_it_is_set(tmp_path):
    path = tmp_path / "gpu-audit.toml"
    path.write_text('fail_on = "error"\nignore = ["free-vrm"]\n')
    with pytest.raises(ConfigError, match=r"gpu-audit.toml:2: .*'free-vrm' \(did you mean "
                                          r"'free-vram'\?\)"):
        load_check_policy(path, known_ids=ignorable(), environ={})
    with pytest.raises(ConfigError, match="environment variable GPU_AUDIT_IGNORE"):
        load_policy(None, search=False, environ={"GPU_AUDIT_IGNORE": "nope"},
                    known_ids=ignorable)


def test_a_deprecated_ignore_id_warns_and_applies_to_its_redirect(deprecated, tmp_path, capsys):
    path = tmp_path / "gpu-audit.toml"
    path.write_text('ignore = ["old-swap", "gpu-lost"]\n')
    policy = load_policy(path, environ={}, known_ids=ignorable)
    assert policy.ignore == ["swap-pressure", "gpu-lost"]
    err = capsys.readouterr().err
    assert "gpu-audit.toml:1: key 'ignore': 'old-swap' is deprecated" in err
    assert "ignoring 'swap-pressure'" in err
    check = load_check_policy(None, known_ids=ignorable(),
                              environ={"GPU_AUDIT_IGNORE": "old-swap"})
    assert check.ignore == ["swap-pressure"]
    assert "environment variable GPU_AUDIT_IGNORE" in capsys.readouterr().err


# --- layering ----------------------------------------------------------------------------------

def test_check_reaches_no_other_producer_for_ids():
    """check judges with the base catalogue's ids, not by importing validate, diag or diff."""
    for path in (REPO / "gpu_audit" / "check").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("gpu_audit.validate", "gpu_audit.diag",
                                                   "gpu_audit.diff")), (path.name, node.module)
