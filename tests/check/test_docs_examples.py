"""The checklist page and the CI examples say what the code does, and the examples are valid."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_audit.check.engine import known_ids
from gpu_audit.check.registry import all_checks
from gpu_audit.config import check_keys, load_check_policy, policy_keys

yaml = pytest.importorskip("yaml", reason="PyYAML reads the CI examples")

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "check.md"


def test_every_check_and_policy_key_is_documented():
    text = DOC.read_text()
    for check_id in all_checks():
        assert f"`{check_id}`" in text, check_id
    for key in check_keys():
        assert f"`{key}`" in text or f"\n{key} = " in text, key
    for spec in all_checks().values():
        for finding_id in spec.views:  # a check that views a finding says so
            assert f"`{finding_id}`" in text, (spec.id, finding_id)


def test_the_documented_policy_is_a_valid_policy(tmp_path):
    (block,) = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    (tmp_path / "pyproject.toml").write_text(block)
    policy = load_check_policy(search_from=tmp_path, known_ids=known_ids(), environ={})
    documented = set(re.findall(r"^(\w+) = ", block, re.M))
    assert documented >= set(check_keys())  # the example shows every check key
    assert documented - set(check_keys()) <= set(policy_keys())  # and some shared ones
    assert policy.gpu_name == "A10G|L4" and policy.min_free_vram_pct == 70


def test_github_workflow_checks_the_runner_first_and_always_uploads_the_report():
    workflow = yaml.safe_load((REPO / "examples" / "github-actions.yml").read_text())
    (job,) = workflow["jobs"].values()
    assert "self-hosted" in job["runs-on"]
    runs = [step.get("run", "").strip() for step in job["steps"]]
    first_work = next(i for i, run in enumerate(runs) if run and "pip install" not in run)
    assert runs[first_work].startswith('"$GPU_AUDIT" check --junit ')
    assert "|| [ $? -eq 1 ]" in runs[first_work]
    # The project's torch is judged after the project is installed; gpu-audit stays off PATH.
    install = next(i for i, run in enumerate(runs) if "requirements.txt" in run)
    stages = next(i for i, run in enumerate(runs) if "--stages" in run)
    assert first_work < install < stages
    assert not any("GITHUB_PATH" in run for run in runs)
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith(
        "actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "reports/"


def test_gitlab_job_checks_the_runner_first_and_reports_junit():
    pipeline = yaml.safe_load((REPO / "examples" / "gitlab-ci.yml").read_text())
    train = pipeline["train"]
    assert train["script"][0].startswith('"$GPU_AUDIT" check --junit reports/gpu-audit.xml')
    install = next(i for i, line in enumerate(train["script"]) if "requirements.txt" in line)
    stages = next(i for i, line in enumerate(train["script"]) if "--stages" in line)
    assert install < stages
    assert not any("export PATH" in line for line in pipeline[".install-gpu-audit"])
    assert train["artifacts"]["when"] == "always"
    assert "reports/gpu-audit.xml" in train["artifacts"]["reports"]["junit"]
    assert pipeline["runner-health"]["allow_failure"] == {"exit_codes": [1]}
