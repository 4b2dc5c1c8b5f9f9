"""Configuration and policy files, generated: every one loads or is a one-line ConfigError
(exit 3), through ``scan --config`` and ``check --policy`` alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_audit.config import load_policy
from gpu_audit.config.check_policy import check_keys
from gpu_audit.config.policy import policy_keys
from gpu_audit.errors import GpuAuditError
from gpu_audit.report.jsonout import scan_document
from gpu_audit.serial import dumps
from tests.builders import gtx1650_three_uvicorn
from tests.fuzz.support import FUZZ, run_cli, timed

KEYS = [*sorted(set(policy_keys()) | set(check_keys())),
        "ignore", "nonsense", "tool", "hang_factor", "hang_min_s", "cycles", "seed",
        "max_retries", "checkpoint_every_pct", "max_split_size_mb", "alloc_conf",
        "startup_timeout_s"]
SECTIONS = ["", "[check]", "[validate]", "[tool.gpu-audit]", "[tool.gpu-audit.check]", "[tool]"]

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),  # nan, inf, 1e+300, -0.0
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.integers(min_value=300, max_value=5000).map(lambda n: "9" * n),  # past int()'s limit
    st.sampled_from(["+inf", "-inf", "+nan", "1e400", "-1e400", "0x7fffffffffffffff", "1_000"]),
)
strings = st.text(max_size=30).map(json.dumps)
scalars = st.one_of(numbers, strings, st.sampled_from(["true", "false", '"error"', '"warn"',
                                                       '"swap-pressure"', '"535.104.05"']))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4).map(lambda v: f"[{', '.join(v)}]"),
                            st.dictionaries(st.sampled_from(["a", "b", "fail_on"]), inner,
                                            max_size=3).map(
                                lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items())
                                + "}")),
    max_leaves=8,
)
lines = st.one_of(
    st.tuples(st.sampled_from(KEYS), values).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    st.sampled_from(SECTIONS),
    st.integers(min_value=1, max_value=4000).map(lambda n: "deep = " + "[" * n + "]" * n),
    st.text(max_size=20),  # anything at all, invalid TOML mostly
)
documents = st.lists(lines, max_size=8).map("\n".join)


@pytest.fixture(scope="module")
def saved_scan(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scan") / "scan.json"
    path.write_text(dumps(scan_document(gtx1650_three_uvicorn(), [], 0)))
    return path


@FUZZ
@given(text=documents, name=st.sampled_from(["gpu-audit.toml", "pyproject.toml", "policy.toml"]))
def test_any_configuration_file(text, name, tmp_path_factory, saved_scan):
    folder = tmp_path_factory.mktemp("cfg")
    path = folder / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    out = str(folder / "reports")
    if name != "policy.toml":
        outcome = run_cli(["scan", "--config", str(path), "--from", str(saved_scan), "--json",
                           "--out", out])
        if outcome.code == 3:
            assert outcome.stderr.count("\n") == 1, outcome.stderr  # one line, nothing else
    outcome = run_cli(["check", "--policy", str(path), "--from", str(saved_scan), "--json",
                       "--out", out])
    if outcome.code == 3:
        assert outcome.stderr.startswith("gpu-audit: "), outcome.stderr
    if name != "policy.toml":
        with timed():
            _validate_plan(path)


def _validate_plan(path: Path) -> None:
    """What ``validate`` makes of the file, short of running anything: a plan or our error."""
    from gpu_audit.config import read_validate_config
    from gpu_audit.validate.plan import ValidateOptions, build_plan

    try:
        build_plan(ValidateOptions(**read_validate_config(path)), load_policy(path, environ={}),
                   environ={}, cwd=path.parent)
    except GpuAuditError as exc:
        assert exc.exit_code == 3 and "\n" not in str(exc)
