"""Secrets in the shapes that used to get through: Stripe and Google API keys wherever they stand,
``-u name:secret`` for any program, a value after ``--`` or after an empty value, a value that
starts with a dash, and a token pasted into allocator settings (the environment's and what a
monitored process publishes), in every place a scan shows them."""

from __future__ import annotations

import io
import json
import time

import pytest

from gpu_audit.config import Policy
from gpu_audit.knowledge.allocator import export_line
from gpu_audit.model import AllocatorConfig, ProcessAllocatorState, Scan, TorchProbe
from gpu_audit.redact import MASK, redact_cmdline, redact_settings, redact_text
from gpu_audit.report.jsonout import scan_document
from gpu_audit.report.markdown import render_scan_markdown
from gpu_audit.report.terminal import make_console, render_scan
from gpu_audit.rules import evaluate
from tests import builders as b

STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dcQz7"
STRIPE_RESTRICTED = "rk_live_51HqLyjWDarjtT1zdp7dcQz7"
STRIPE_TEST = "sk_test_4eC39HqLyjWDarjtT1zdp7dcQz7"
GOOGLE = "AIzaSyQz7b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"  # 39 characters
HF = "hf_Qz7a1B2c3D4e5F6g7H8i9J0k1Lm"


def _both(argv: list[str]) -> str:
    """What the argv redactor and the free-text redactor (the line joined) show, together."""
    return " ".join(redact_cmdline(argv)) + "\n" + redact_text(" ".join(argv))


# --- Stripe and Google keys in every position ------------------------------------------------

def _positions(secret: str) -> list[list[str]]:
    return [
        ["app", secret],
        ["app", f"key={secret}"],
        ["app", f"--stripe={secret}"],
        ["curl", f"https://maps.googleapis.com/maps/api/geocode/json?address=x&key={secret}"],
        ["curl", f"https://h/v1?k={secret}&x=1"],
        ["app", f"--config={json.dumps({'client': secret})}"],
        ["app", f"'{secret}'"],
        ["app", f'"{secret}"'],
        ["app", f"MY_{secret}"],
        ["sh", "-c", f"STRIPE={secret} python pay.py"],
    ]


@pytest.mark.parametrize("secret", [STRIPE, STRIPE_RESTRICTED, STRIPE_TEST, GOOGLE])
@pytest.mark.parametrize("position", range(10))
def test_stripe_and_google_keys_are_masked_wherever_they_stand(secret, position):
    argv = _positions(secret)[position]
    out = _both(argv)
    assert secret not in out, out
    assert secret[8:20] not in out, out  # not even part of it
    assert MASK in out


def test_stripe_publishable_keys_are_public_and_kept():
    key = "pk_live_51HqLyjWDarjtT1zdp7dc"
    assert redact_text(f"stripe.js with {key}") == f"stripe.js with {key}"


# --- -u name:secret for any program ------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["wget", "-u", "bob:Qz7pw"],
    ["wget", "--user", "bob:Qz7pw", "https://h"],
    ["http", "-a", "bob:Qz7pw", "https://h"],
    ["xh", "-a", "bob:Qz7pw", "https://h"],
    ["aria2c", "-u", "bob:Qz7pw"],
    ["docker", "login", "-u", "bob", "-p", "Qz7pw", "registry.example"],
    ["docker", "login", "-u", "bob", "-pQz7pw", "registry.example"],
    ["oc", "login", "-u", "bob", "-p", "Qz7pw"],
    ["myclient", "-u", "bob:Qz7pw"],
    ["myclient", "-ubob:Qz7pw"],
    ["myclient", "--user", "bob:Qz7pw"],
])
def test_user_and_password_pairs_are_masked_for_any_program(argv):
    out = _both(argv)
    assert "Qz7pw" not in out, out
    assert "bob" in out  # the user name is no secret


@pytest.mark.parametrize("argv", [
    ["python", "-u", "train.py", "--lr", "1e-4"],
    ["docker", "run", "-u", "1000:1000", "-p", "8080:80", "img"],
    ["sudo", "-u", "alice", "nvidia-smi"],
    ["sort", "-u", "names.txt"],
])
def test_dash_u_without_a_password_is_kept(argv):
    assert redact_cmdline(argv) == argv
    assert redact_text(" ".join(argv)) == " ".join(argv)


# --- values after "--", after an empty value, or starting with a dash --------------------------

@pytest.mark.parametrize("argv", [
    ["prog", "--api-key", "--", "Qz7plainsecret"],
    ["prog", "--token", "--", "Qz7plainsecret"],
    ["prog", "--token", "", "Qz7plainsecret"],
    ["prog", "--token", "", HF],
    ["prog", "--password", "", "--", "Qz7plainsecret"],
    ["prog", "--api-key", "--Qz7S3cr3tVa1ue99"],
    ["prog", "--hf-token", "-Qz7AbC_dEf9x8Y"],
    ["curl", "-u", "", "bob:Qz7plainsecret"],
])
def test_a_value_after_dashes_or_an_empty_value_is_masked(argv):
    out = _both(argv)
    assert "Qz7" not in out, out


def test_the_empty_value_itself_is_shown_as_empty():
    assert redact_cmdline(["prog", "--token", "", "Qz7x"]) == ["prog", "--token", "", MASK]
    assert redact_cmdline(["prog", "--api-key", "--", "Qz7x"]) == ["prog", "--api-key", "--",
                                                                  MASK]


@pytest.mark.parametrize("argv", [
    ["prog", "--token", "", "--model", "gpt2"],
    ["t.py", "--use_auth_token", "--model_name_or_path", "gpt2", "--fp16"],
    ["t.py", "--push_to_hub_token", "-v", "--local-rank", "1"],
])
def test_an_option_after_a_secret_option_is_still_an_option(argv):
    assert redact_cmdline(argv) == argv


# --- long words: time linear in their length -------------------------------------------------

@pytest.mark.parametrize("text", [
    "x" * 200_000,  # scanned once for a URL scheme, not once per character
    "?" * 200_000,  # query parameters: bounded names
    "a:" * 100_000,  # a chain of assignments: a loop, no recursion
    "--env=" + "A=" * 100_000,
    "lr=1," * 40_000,
])
def test_a_long_word_is_redacted_in_linear_time(text):
    started = time.perf_counter()
    assert redact_text(text) and redact_cmdline(["app", text])
    assert time.perf_counter() - started < 60  # about a second; quadratic was minutes or a crash


# --- allocator settings with a token in them ----------------------------------------------------

def test_redact_settings_masks_entry_by_entry_and_keeps_the_rest():
    conf = f"expandable_segments:True,hf:{HF},roundup_power2_divisions:[256:1,512:2],api_key:Qz7"
    assert redact_settings(conf) == ("expandable_segments:True,hf:***,"
                                     "roundup_power2_divisions:[256:1,512:2],api_key:***")
    assert redact_settings("max_split_size_mb:128") == "max_split_size_mb:128"


@pytest.mark.parametrize("argv", [
    ["app", "--config=lr:0.1,api_key:Qz7plainsecret"],
    ["app", "expandable_segments:True,hf_token:Qz7plainsecret"],
    ["app", "--opts", "x,token=Qz7plainsecret,y=1"],
])
def test_a_secret_pair_inside_a_comma_list_is_masked(argv):
    out = _both(argv)
    assert "Qz7" not in out, out
    assert "api_key:***" in out or "hf_token:***" in out or "token=***" in out


def test_an_export_line_never_repeats_a_token():
    line = export_line(f"expandable_segments:True,token:{HF}", (2, 9))
    assert HF not in line and "expandable_segments:True" in line


def _environment_scan(conf: str) -> Scan:
    alloc = AllocatorConfig(source="pid:4242", pytorch_cuda_alloc_conf=conf,
                            pytorch_alloc_conf=None, torch_version="2.9.1+cu128",
                            torch_variant="cuda", environment={})
    probe = TorchProbe(python="/usr/bin/python3", torch_version="2.9.1+cu128",
                       allocator_settings=conf)
    return b.scan(allocator=alloc, torch_probe=probe)


def _published_scan(settings: str) -> Scan:
    state = ProcessAllocatorState(
        cuda_device=0, published_at="2026-11-22T10:00:00.000Z", age_s=2.0, interval_s=5.0,
        torch_version="2.9.1+cu128", backend="native", settings=settings,
        expandable_segments=False, allocated_bytes=20 * b.GIB, reserved_bytes=70 * b.GIB,
        inactive_split_bytes=40 * b.GIB, reserved_unallocated_bytes=50 * b.GIB,
        fragmentation_pct=71.4, split_fragmentation_pct=57.1)
    trainer = b.process(4242, 72 * 1024, ["python", "train.py"], allocator=state)
    return b.scan(gpus=[b.gpu(0, used=73 * b.GIB)], processes=[trainer])


def _everything(scan: Scan) -> tuple[str, list]:
    """Every output of a scan (terminal, markdown, JSON), and its findings."""
    findings = evaluate(scan, Policy())
    buffer = io.StringIO()
    render_scan(scan, findings, 0, make_console(buffer), verbose=True)
    document = json.dumps(scan_document(scan, findings, 0))
    return "\n".join([buffer.getvalue(), render_scan_markdown(scan, findings, 0), document]), \
        findings


@pytest.mark.parametrize("conf", [
    f"expandable_segments:True,max_split_size_mb:{HF}",  # the token as a value
    f"max_split_size_mb:128,{HF}",  # the token as an entry of its own
    "expandable_segments:True,hf_token:Qz7plainsecret",  # a secret-named key
    "garbage_collection_threshold:0.8,api_key:Qz7plainsecret,max_split_size_mb:64",
])
def test_a_token_in_the_environments_allocator_settings_is_shown_nowhere(conf):
    out, findings = _everything(_environment_scan(conf))
    assert any(f.id.startswith("alloc-conf") for f in findings)  # the string is judged
    assert "Qz7" not in out
    for finding in findings:
        text = json.dumps([finding.title, finding.detail, finding.remedy, finding.evidence])
        assert "Qz7" not in text, finding.id


def test_a_token_in_a_published_allocator_setting_is_not_repeated_in_the_fix():
    scan = _published_scan(f"max_split_size_mb:512,hf:{HF}")
    out, findings = _everything(scan)
    (fragmented,) = [f for f in findings if f.id == "allocator-fragmentation"]
    assert "export PYTORCH_ALLOC_CONF='max_split_size_mb:512,hf:***," in fragmented.remedy
    assert "Qz7" not in out


def test_a_published_token_reaches_no_check_output():
    from gpu_audit.check.engine import judge
    from gpu_audit.config import CheckPolicy
    from gpu_audit.report.github import render_check_markdown
    from gpu_audit.report.junit import render_junit

    report = judge(_published_scan(f"max_split_size_mb:512,hf:{HF}"), CheckPolicy(), user="ci")
    assert any(r.evidence.get("allocator_settings") for r in report.results if r.evidence)
    for out in (render_check_markdown(report), render_junit(report)):
        assert "allocator_settings" in out and "Qz7" not in out


def test_a_published_token_reaches_no_check_document():
    from gpu_audit.check.engine import judge
    from gpu_audit.config import CheckPolicy
    from gpu_audit.report.check_document import check_document
    from gpu_audit.serial import dumps

    for scan in (_published_scan(f"max_split_size_mb:512,hf:{HF}"),
                 _environment_scan(f"expandable_segments:True,hf_token:{HF}")):
        document = dumps(check_document(judge(scan, CheckPolicy(), user="ci")))
        assert "Qz7" not in document


def test_a_node_documents_allocator_secret_reaches_no_fleet_document():
    from gpu_audit.fleet.nodes import node_from_document

    scan = _environment_scan("expandable_segments:True,api_key:Qz7plainsecret")
    document = json.loads(json.dumps(scan_document(scan, [], 0)))
    document["allocator"]["pytorch_cuda_alloc_conf"] = \
        "expandable_segments:True,api_key:Qz7plainsecret"  # as another tool might write it
    node = node_from_document(document, "node.json")
    assert "Qz7" not in repr(node)


def test_a_publication_is_masked_as_it_is_read(tmp_path):
    import os
    import subprocess
    import sys

    from gpu_audit.collect.monitor_files import attach_allocator_states, read_publications
    from tests import fakegpu
    from tests.test_bounds_inputs import hostile_publication

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = tmp_path / "runtime"
        hostile_publication(folder, child.pid)
        path = folder / f"{child.pid}.json"
        doc = json.loads(path.read_text())
        doc["allocator_settings"] = f"max_split_size_mb:512,token:{HF}"
        path.write_text(json.dumps(doc))
        os.chmod(path, 0o600)
        published = read_publications([folder])
    finally:
        child.kill()
        child.wait()
    gpu = fakegpu.h100_gpu(0)
    process = b.process(child.pid, 72 * 1024, ["python"], start_time=None, gpu_uuid=gpu["uuid"])
    (joined,) = attach_allocator_states([process], [b.gpu(0, uuid=gpu["uuid"])], published)
    assert joined.allocator.settings == "max_split_size_mb:512,token:***"
