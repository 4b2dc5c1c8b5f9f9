"""``gpu-audit rules [ID]`` as a user runs it, and the generated reference page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.cli.rules import all_entries as all_rules
from gpu_audit.cli.rules import render_page
from gpu_audit.explain.signatures import CLASSES, SIGNATURES

REPO = Path(__file__).resolve().parents[2]
DOCS_PAGE = REPO / "docs" / "rules.md"


def rules_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", "rules", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_list_shows_every_id_with_its_severity(cli_env):
    result = rules_cli([], cli_env)
    assert result.returncode == 0, result.stderr
    findings, _, _ = result.stdout.partition("\n\n")
    lines = findings.splitlines()
    assert lines[0].split() == ["ID", "PRODUCER", "LIFECYCLE", "SEVERITY", "SUMMARY"]
    listed = {line.split()[0]: line.split()[3] for line in lines[1:]}
    assert listed == {rule_id: r.severity_text for rule_id, r in all_rules().items()}
    assert listed["free-vram"] == "-" and "check" in findings and "explain" in findings
    assert listed["alloc-conf-invalid"] == "error"
    assert listed["ecc-uncorrectable"] == "critical"


def test_one_id_prints_its_whole_documentation(cli_env):
    result = rules_cli(["alloc-conf-ignored"], cli_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("alloc-conf-ignored (warning) - Allocator configuration")
    assert "producer: scan; lifecycle: stable" in result.stdout
    assert "pytorch/pytorch#183387" in result.stdout


def test_unknown_id_is_a_usage_error_with_a_suggestion(cli_env):
    result = rules_cli(["alloc-conf-ignord"], cli_env)
    assert result.returncode == 3
    assert "did you mean 'alloc-conf-ignored'" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_json_document(cli_env):
    result = rules_cli(["--json"], cli_env)
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpu-audit.rules/1" and doc["generated_at"].endswith("Z")
    ids = [r["id"] for r in doc["rules"]]
    assert sorted(ids) == sorted(all_rules())
    one = json.loads(rules_cli(["xid-events", "--json"], cli_env).stdout)
    (rule,) = one["rules"]
    assert rule["severity"] == "error" and rule["section"] == "Hardware health"
    assert rule["doc"].startswith(rule["summary"])


def test_every_rule_is_documented():
    for rule_id, rule_obj in all_rules().items():
        assert rule_obj.summary.endswith((".", ")", '"', "`")), rule_id
        body = rule_obj.doc.partition("\n")[2].strip()
        assert len(body) > 80, f"{rule_id} needs an explanation below its summary line"


def test_committed_reference_page_is_up_to_date():
    expected = render_page()
    assert DOCS_PAGE.read_text() == expected, (
        "docs/rules.md is stale: run `gpu-audit rules --markdown > docs/rules.md`")


def test_markdown_flag_prints_the_page(cli_env):
    result = rules_cli(["--markdown"], cli_env)
    assert result.returncode == 0
    assert result.stdout == render_page()
    assert "### `row-remap-failure`" in result.stdout
    assert "#### `driver-mismatch/unsupported-ptx`" in result.stdout
    assert rules_cli(["--markdown", "--json"], cli_env).returncode == 3


def test_validation_findings_are_documented_and_listed(cli_env):
    """Every id validate can emit has an entry, and `gpu-audit rules` shows them."""
    import re
    from pathlib import Path

    import gpu_audit.validate.findings as findings_module
    from gpu_audit.validate.catalogue import VALIDATION_DOCS as VALIDATION_FINDINGS

    source = Path(findings_module.__file__).read_text()
    emitted = set(re.findall(r'"([a-z]+(?:-[a-z]+)+)"', source))
    emitted -= {"gpu-audit"}  # the tool's own name in messages
    documented = set(VALIDATION_FINDINGS) | set(all_rules())
    assert emitted <= documented, emitted - documented
    listing = subprocess.run([sys.executable, "-m", "gpu_audit", "rules"], env=cli_env,
                             capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0
    for finding_id in VALIDATION_FINDINGS:
        assert finding_id in listing.stdout
    one = subprocess.run([sys.executable, "-m", "gpu_audit", "rules", "oom-unrecovered"],
                         env=cli_env, capture_output=True, text=True, timeout=60)
    assert one.returncode == 0 and "Validation runs" in one.stdout


def test_list_shows_explain_classes_and_signatures(cli_env):
    result = rules_cli([], cli_env)
    _, _, explained = result.stdout.partition("\n\n")
    lines = explained.splitlines()
    assert lines[0].split()[:2] == ["EXPLAIN", "CLASS"]
    classes = [line.split(":")[0] for line in lines[1:] if not line.startswith(" ")]
    assert classes == list(CLASSES)
    rows = {line.split()[0]: line.split()[1] for line in lines[1:] if line.startswith("  ")}
    assert list(rows) == [sig.id for cls in CLASSES for sig in SIGNATURES if sig.cls == cls]
    assert rows["gpu-hardware/fallen-off-bus"] == "critical"
    assert rows["cuda-oom/message-detail"] == "-"  # a continuation line, never an incident


def test_one_signature_prints_its_example_and_what_explain_says(cli_env):
    result = rules_cli(["driver-mismatch/unsupported-ptx"], cli_env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("driver-mismatch/unsupported-ptx (error) - signature of class "
                          "driver-mismatch")
    assert "the provided PTX was compiled with an unsupported toolchain" in out
    assert "\nWhy: The PTX in this program" in out and "nvidia-smi" in out.split("Fix:")[1]


def test_one_class_prints_its_text_and_signatures_in_match_order(cli_env):
    out = rules_cli(["host-oom"], cli_env).stdout
    assert out.startswith("host-oom (-) - Explain failure classes (gpu-audit explain)")
    assert out.index("host-oom/kernel-oom-killer") < out.index("host-oom/shell-killed")


def test_a_name_that_is_a_finding_and_a_class_shows_both(cli_env):
    out = rules_cli(["nvml-unavailable"], cli_env).stdout
    assert out.startswith("nvml-unavailable (error) - NVML and the driver")
    assert "nvml-unavailable - failure class of gpu-audit explain" in out


def test_json_lists_explain_signatures(cli_env):
    doc = json.loads(rules_cli(["--json"], cli_env).stdout)
    assert [c["class"] for c in doc["explain"]] == list(CLASSES)
    ids = [s["id"] for c in doc["explain"] for s in c["signatures"]]
    assert sorted(ids) == sorted(sig.id for sig in SIGNATURES)
    one = json.loads(rules_cli(["cuda-oom/cuda-error", "--json"], cli_env).stdout)
    assert one["rules"] == []
    ((sig,),) = [c["signatures"] for c in one["explain"]]
    assert sig["id"] == "cuda-oom/cuda-error" and sig["explanation"] and sig["remedy"]


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_the_list_fits_the_terminal_and_keeps_every_summary_word(columns):
    from gpu_audit.cli.rules import all_entries, render_list

    rules = all_entries()
    text = render_list(rules, columns=columns)
    assert max(len(line) for line in text.splitlines()) < columns
    words = " ".join(text.split())
    for entry in rules.values():
        assert " ".join(entry.summary.split()) in words, entry.id


def test_a_renamed_signature_id_still_shows_its_signature(cli_env):
    # `illegal-memory-access/launch-failure` was `gpu-hardware/launch-failure`: notes and
    # scripts that name the old id keep working, and are told the new one.
    result = rules_cli(["gpu-hardware/launch-failure"], cli_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("illegal-memory-access/launch-failure ")
    assert "'gpu-hardware/launch-failure' was renamed: it is now " \
           "'illegal-memory-access/launch-failure'" in result.stderr
