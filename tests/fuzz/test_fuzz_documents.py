"""``scan --from`` and ``check --from`` on generated documents: a real document with parts
replaced by anything JSON can hold, and JSON that is no document at all. Each is judged or
refused with exit 3; none crashes. The allocator settings inside are fuzzed the same way."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_audit.knowledge.allocator.checks import analyse, repaired
from gpu_audit.report.jsonout import scan_document
from gpu_audit.serial import dumps
from tests.builders import gtx1650_three_uvicorn
from tests.fuzz.support import FUZZ, run_cli, timed

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=10,
)

ALLOC_WORDS = ["max_split_size_mb", "expandable_segments", "garbage_collection_threshold",
               "roundup_power2_divisions", "backend", "pinned_use_cuda_host_register",
               "release_lock_on_cudamalloc", "True", "False", "native", "cudaMallocAsync",
               "128", "0.6", "-5", "1e400", "nan", "١٢٨", "[", "]", ":", ",", ">", "9" * 4400]
alloc_confs = st.lists(st.one_of(st.sampled_from(ALLOC_WORDS), st.text(max_size=6)),
                       max_size=12).map("".join)


@pytest.fixture(scope="module")
def base_document() -> dict[str, Any]:
    return json.loads(dumps(scan_document(gtx1650_three_uvicorn(), [], 0)))


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found.extend(_paths(value, (*prefix, key)))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found.extend(_paths(value, (*prefix, index)))
    return found


def _replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


hostile_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["\x1b]0;owned\x07", "\x1b[2J", "a\n::error ::injected", "</details>",
                     "<img src=x onerror=alert(1)>", "[link](http://x)", "|", "\r", "\u202e",
                     "x" * 5000]),
)


def _like(draw, value: Any) -> Any:
    """A value of the same JSON type as ``value``, chosen to be hostile."""
    if isinstance(value, bool):
        return draw(st.booleans())
    if isinstance(value, int):
        return draw(st.one_of(st.integers(min_value=-(2**64), max_value=2**64),
                              st.sampled_from([0, -1, 2**63, 10**30])))
    if isinstance(value, float):
        return draw(st.floats(allow_nan=False, allow_infinity=False))
    if isinstance(value, str):
        return draw(hostile_text)
    if isinstance(value, list):
        return draw(st.sampled_from([[], value * 3, value[:1], list(reversed(value))]))
    return draw(json_values)


@st.composite
def mutated_documents(draw, base: dict[str, Any]) -> Any:
    """``base`` with a few values replaced: mostly by hostile values of the same type (which
    get past the schema), sometimes by anything at all."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        old = doc
        for step in path:
            old = old[step]
        new = _like(draw, old) if draw(st.integers(0, 4)) else draw(json_values)
        doc = _replace(doc, path, new)
    return doc


@FUZZ
@given(data=st.data(), as_check=st.booleans())
def test_any_saved_document(data, as_check, base_document, tmp_path_factory):
    kind = data.draw(st.sampled_from(["mutated", "mutated", "random", "alloc"]))
    if kind == "mutated":
        doc = data.draw(mutated_documents(base_document))
    elif kind == "alloc":
        doc = copy.deepcopy(base_document)
        doc["allocator"]["pytorch_cuda_alloc_conf"] = data.draw(alloc_confs)
        doc["allocator"]["pytorch_alloc_conf"] = data.draw(st.one_of(st.none(), alloc_confs))
    else:
        doc = data.draw(json_values)
    if as_check and isinstance(doc, dict):
        doc = {"schema": "gpu-audit.check/1", "snapshot": doc, "user": "alice"}
    folder = tmp_path_factory.mktemp("doc")
    path = folder / "doc.json"
    path.write_text(json.dumps(doc), encoding="utf-8", errors="surrogatepass")
    out = str(folder / "reports")
    run_cli(["scan", "--from", str(path), "--out", out])
    run_cli(["check", "--from", str(path), "--json", "--out", out])


@FUZZ
@given(conf=alloc_confs, version=st.sampled_from([None, "2.1.0", "2.8.0", "2.9.1", "2.10.0"]))
def test_any_allocator_setting_string(conf, version):
    with timed():
        parsed = analyse(conf, version)
        repaired(parsed)
    for issue in parsed.issues:
        assert 0 <= issue.start <= issue.end <= len(conf)
