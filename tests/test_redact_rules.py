"""The redactor's table, one test per pattern, the shapes that used to leak, and a property
test: a generated secret in any known shape never survives in any output format."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gpu_audit.redact import (
    MASK,
    NAME_RULES,
    TEXT_RULES,
    is_secret_name,
    redact_cmdline,
    redact_env,
    redact_text,
)
from tests import builders as b


@pytest.mark.parametrize("rule", NAME_RULES + TEXT_RULES, ids=lambda r: r.id)
def test_each_rule_hides_its_example(rule):
    out = redact_cmdline(rule.example)
    assert rule.secret not in " ".join(out), out
    assert MASK in " ".join(out)
    assert rule.secret not in redact_text(" ".join(rule.example))


LEAKS = [
    # A secret-named flag without a value masks no flag name, and the real value is masked.
    (["python", "t.py", "--use_auth_token", "--hub_token", "MYSECRET"], "MYSECRET"),
    (["curl", "-H", "Authorization: Bearer MYSECRET", "https://h"], "MYSECRET"),
    (["curl", "-H", "Authorization:", "Bearer", "MYSECRET"], "MYSECRET"),
    (["app", "--authorization", "MYSECRET"], "MYSECRET"),
    (["app", "--authorization-token", "MYSECRET"], "MYSECRET"),
    (["app", "--author-token", "MYSECRET"], "MYSECRET"),
    (["app", "--key", "MYSECRET"], "MYSECRET"),
    (["app", "--pw", "MYSECRET"], "MYSECRET"),
    (["app", "--bearer", "MYSECRET"], "MYSECRET"),
    (["app", "--cred=MYSECRET"], "MYSECRET"),
    (["app", "--wandb-key", "MYSECRET"], "MYSECRET"),
    (["app", "--login", "user:MYSECRET"], "MYSECRET"),
    (["app", "--login=user:MYSECRET"], "MYSECRET"),
    (["docker", "run", "--env=WANDB_API_KEY=MYSECRET", "img"], "MYSECRET"),
    (["docker", "run", "-e", "HF_TOKEN=MYSECRET", "img"], "MYSECRET"),
    (["app", "--header=X-Api-Key:MYSECRET"], "MYSECRET"),
    (["app", '--config={"api_key":"MYSECRET"}'], "MYSECRET"),
    (["app", "--config", "{'hf_token': 'MYSECRET', 'lr': 0.1}"], "MYSECRET"),
    (["mysql", "-u", "root", "-p", "MYSECRET"], "MYSECRET"),
    (["/usr/bin/mysqldump", "-uroot", "-pMYSECRET", "db"], "MYSECRET"),
    (["mariadb", "-pMYSECRET"], "MYSECRET"),
    (["sshpass", "-p", "MYSECRET", "ssh", "h"], "MYSECRET"),
    (["curl", "-u", "bob:MYSECRET", "https://h"], "MYSECRET"),
    (["app", "postgres://u:p4ss@MYSECRET@h:5432/db"], "p4ss@MYSECRET"),
    (["app", "--db=postgres://u:MYSECRET@h/db"], "MYSECRET"),
    (["bash", "-c", "HF_TOKEN=MYSECRET python t.py --hf_token MYSECRET"], "MYSECRET"),
]


@pytest.mark.parametrize(("argv", "secret"), LEAKS, ids=lambda v: str(v)[:40])
def test_shapes_that_used_to_leak_are_masked(argv, secret):
    out = redact_cmdline(argv)
    assert secret not in " ".join(out), out
    assert not any(s and s in " ".join(out) for s in secret.split("@")), out


def test_a_flag_after_a_valueless_secret_flag_keeps_its_name():
    out = redact_cmdline(["t.py", "--use_auth_token", "--hub_token", "MYSECRET", "--lr", "1"])
    assert out == ["t.py", "--use_auth_token", "--hub_token", MASK, "--lr", "1"]
    assert redact_cmdline(["x", "-H", "Authorization: Bearer X"])[2] == f"Authorization: {MASK}"
    assert redact_text("postgres://u:p@ss@h/db") == f"postgres://u:{MASK}@h/db"


BENIGN = [
    ["python", "gen.py", "--tokenizer", "gpt2", "--max-new-tokens", "64", "--author", "me"],
    ["python", "t.py", "--max_new_tokens", "5", "--num-tokens", "3", "--pad-token", "0"],
    ["python", "t.py", "--sort-key", "loss", "--image_key", "img", "--num-passes", "3"],
    ["python", "t.py", "--token-type-ids", "1", "--authors", "a,b", "--keep", "1"],
    ["psql", "-h", "db", "-p", "5432", "-U", "bob"],  # psql's -p is the port
    ["python", "-m", "torch.distributed.run", "--nproc-per-node", "8", "train.py"],
    ["python", "t.py", "--output", "s3://bucket/x", "--user", "alice"],
]


@pytest.mark.parametrize("argv", BENIGN, ids=lambda v: " ".join(v)[:40])
def test_arguments_that_only_mention_secrets_are_kept(argv):
    assert redact_cmdline(argv) == argv


def test_names_and_environment():
    assert is_secret_name("HF_TOKEN") and is_secret_name("--hub-token")
    assert is_secret_name("Authorization") and not is_secret_name("--author")
    assert not is_secret_name("max_new_tokens") and not is_secret_name("tokenizer_name")
    env = redact_env({"WANDB_API_KEY": "x", "DB": "mysql://u:p@ss@h/d",
                      "CUDA_VISIBLE_DEVICES": "0"})
    assert env == {"WANDB_API_KEY": MASK, "DB": f"mysql://u:{MASK}@h/d",
                   "CUDA_VISIBLE_DEVICES": "0"}


def test_validate_cycle_errors_are_redacted_in_the_log():
    from gpu_audit.validate.channels import one_line

    line = one_line(RuntimeError("login failed: --hf_token MYSECRET to postgres://u:pw@h/d\n"
                                 "second line"))
    assert "MYSECRET" not in line and ":pw@" not in line
    assert line.startswith("RuntimeError: login failed: --hf_token ***")


class LeaksSecretInError:
    """A validate workload whose cycle raises an error quoting a secret."""

    def setup(self, ctx):
        self.count = 0

    def cycle(self, ctx):
        raise ValueError("cannot reach postgres://u:MYSECRET@db/x with --api-key MYSECRET")

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = state["count"]


def test_validate_per_cycle_log_and_state_hold_no_secret(cli_env, tmp_path):
    from tests.validate.runs import run_validate

    done = run_validate(["--workload", f"{__name__}:LeaksSecretInError", "--stage", "smoke",
                         "--device", "cpu", "--out", str(tmp_path), "--run-id", "r",
                         "--no-plots", "--json"], cli_env)
    assert done.returncode == 2, done.stderr
    run = tmp_path / "runs" / "r"
    log = (run / "cycles.jsonl").read_text()
    assert "cycle-failed" in log
    everything = log + (run / "state.json").read_text() + done.stdout + done.stderr
    for name in ("report.md", "report.json"):
        if (run / name).exists():
            everything += (run / name).read_text()
    assert "MYSECRET" not in everything


# --- property: a generated secret never survives in any output ---------------------------------

SECRET = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789@#%+/=_",
                 min_size=8, max_size=24).filter(
    lambda s: s[-1].isalnum() and "//" not in s and sum(c.isalnum() for c in s) >= 6,
).map(lambda s: "Qz7" + s)  # a prefix no output contains by itself
NAMES = st.sampled_from(["--hf-token", "--hub_token", "--api-key", "--password", "--key",
                         "--pw", "--bearer", "--wandb-key", "--authorization", "--secret",
                         "--author-token", "--client_secret", "--db-pass"])


def _shapes(secret: str, name: str) -> list[tuple[list[str], str]]:
    """(a command line, the secret it must not show) for every shape the redactor knows."""
    plain = "".join(c for c in secret if c.isalnum())
    return [
        (["python", "t.py", name, secret], secret),
        (["python", "t.py", f"{name}={secret}"], secret),
        (["python", "t.py", "--use_auth_token", name, secret], secret),
        (["curl", "-H", f"Authorization: Bearer {secret}"], secret),
        (["docker", f"--env=WANDB_API_KEY={secret}"], secret),
        (["app", f"--header=X-Api-Key:{secret}"], secret),
        (["app", "--config=" + json.dumps({"api_key": secret})], secret),
        (["mysql", "-uroot", f"-p{secret}"], secret),
        (["mysql", "-p", secret], secret),
        (["app", "--login", f"user:{secret}"], secret),
        (["app", f"postgres://u:{plain}@{plain}@db/x"], plain),
        ([f"HF_TOKEN={secret}", "python", "t.py"], secret),
    ]


def _outputs(argv: list[str]) -> str:
    """Terminal, JSON, markdown and JUnit output of a scan and a check of one process."""
    import io

    from gpu_audit.check.engine import judge
    from gpu_audit.config import CheckPolicy
    from gpu_audit.report.github import render_check_markdown
    from gpu_audit.report.jsonout import scan_document
    from gpu_audit.report.junit import render_junit
    from gpu_audit.report.markdown import render_scan_markdown
    from gpu_audit.report.terminal import make_console, render_scan
    from gpu_audit.rules import evaluate

    scan = b.scan(processes=[b.process(4242, 900, redact_cmdline(argv))])
    findings = evaluate(scan)
    buffer = io.StringIO()
    render_scan(scan, findings, 0, make_console(buffer), verbose=True)
    report = judge(scan, CheckPolicy(), user="ci")
    return "\n".join([buffer.getvalue(), json.dumps(scan_document(scan, findings, 0)),
                      render_scan_markdown(scan, findings, 0), render_junit(report),
                      render_check_markdown(report)])


@seed(20261123)
@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(secret=SECRET, name=NAMES, shape=st.integers(min_value=0, max_value=11))
def test_a_generated_secret_never_survives_in_any_output(secret, name, shape):
    argv, hidden = _shapes(secret, name)[shape]
    redacted = redact_cmdline(argv)
    assert hidden not in " ".join(redacted), (argv, redacted)
    assert hidden not in redact_text(" ".join(argv)), argv


@seed(20261123)
@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(secret=SECRET, name=NAMES, shape=st.integers(min_value=0, max_value=11))
def test_a_generated_secret_never_reaches_a_rendered_report(secret, name, shape):
    argv, hidden = _shapes(secret, name)[shape]
    out = _outputs(argv)
    assert "4242" in out and ("t.py" in out or argv[0] in out)  # the command line is shown
    assert hidden not in out


def _every_text_rule(text: str) -> str:
    """The text rules applied one after another with no word checked first."""
    from gpu_audit.redact import is_secret_name

    for rule in TEXT_RULES:
        if rule.id == "quoted-pair":
            text = rule.pattern().sub(
                lambda m: m["keep"] + MASK if is_secret_name(m["name"]) else m[0], text)
        else:
            text = rule.pattern().sub(lambda m: m["keep"] + MASK, text)
    return text


# Pieces of every text rule's shapes, their neighbours, and letters that match ASCII ones when
# case is ignored ("ſ" is "s", "K" is "k"): texts built of them must be masked alike.
_PIECES = ["://", "?", "&", "=", '"', "'", ":", "@", "/", " ", "\n", "_", "-", ".", "x", "Z", "7",
           "gh", "GHP_", "p_", "github_pat_", "hf_", "HF_", "sk-", "ſk-", "xoxb-", "AKIA", "akia",
           "glpat-", "eyJ", "sk_live_", "rK_TEST_", "sK_live_", "AIza", "aiza", "token", "api_key",
           "-----BEGIN PRIVATE KEY-----", "-----begin rsa private key-----", "-----END ",
           "A1b2C3d4E5f6G7h8I9j0", "0123456789abcdefABCDEF"]


@seed(20261127)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join))
def test_checking_words_first_masks_what_every_rule_would(text):
    from gpu_audit.redact import _text_rules

    assert _text_rules(text) == _every_text_rule(text)


@pytest.mark.parametrize("rule", NAME_RULES + TEXT_RULES, ids=lambda r: r.id)
def test_each_rule_needs_a_word_its_example_holds(rule):
    assert rule.needs, "a rule without words to check runs on every text"
    assert any(word in " ".join(rule.example).lower() for word in rule.needs)


def test_a_text_without_their_words_compiles_no_text_rule():
    for rule in TEXT_RULES:
        rule.pattern.cache_clear()
    texts = ["/usr/bin/python3", "-u", "train.py", "--lr", "0.1", "sleep 3600", "NVIDIA H100"]
    assert redact_text(" ".join(texts)) == " ".join(texts)
    assert redact_cmdline(texts) == texts
    assert [r.id for r in TEXT_RULES if r.pattern.cache_info().currsize] == []


def _any_name_rule(name: str) -> bool:
    """is_secret_name with no word checked first."""
    from gpu_audit.redact import BENIGN_NAMES

    bare = name.lstrip("-").lower()
    if not bare or BENIGN_NAMES().search(bare):
        return False
    return any(rule.pattern().search(bare) for rule in NAME_RULES)


_NAME_PIECES = ["-", "_", ".", "x", "Q", "9", "pass", "PASS", "paſſ", "word", "wd", "pwd", "pw",
                "secret", "SECRET", "token", "tokenizer", "s", "auth", "or", "is", "api", "key",
                "keys", "access", "private", "cred", "ential", "bearer", "cookie", "signature",
                "session", "id", "max", "vocab", "hash", "K", "ſ"]


@seed(20261127)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_NAME_PIECES), max_size=8).map("".join))
def test_checking_words_first_judges_names_as_every_rule_would(name):
    assert is_secret_name(name) == _any_name_rule(name)


def test_an_option_name_without_their_words_compiles_no_name_rule():
    from gpu_audit.redact import BENIGN_NAMES

    BENIGN_NAMES.cache_clear()
    for rule in NAME_RULES:
        rule.pattern.cache_clear()
    assert redact_cmdline(["python", "train.py", "--lr", "0.1", "--batch-size=32"]) == [
        "python", "train.py", "--lr", "0.1", "--batch-size=32"]
    assert BENIGN_NAMES.cache_info().currsize == 0
    assert [r.id for r in NAME_RULES if r.pattern.cache_info().currsize] == []


def test_a_word_without_space_or_unprintable_characters_holds_no_whitespace():
    """The redactor skips its whitespace pattern for such words: no character ``\\s`` matches
    is printable, but the space."""
    import re

    from gpu_audit.redact import _may_have_space

    spaces = [chr(c) for c in range(0x110000) if re.match(r"\s", chr(c))]
    assert len(spaces) > 20
    assert all(_may_have_space(f"a{c}b") for c in spaces)
    assert not _may_have_space("--model=meta-llama/Llama-3-8B")
