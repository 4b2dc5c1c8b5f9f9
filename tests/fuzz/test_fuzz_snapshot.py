"""``gpu-audit snapshot FILE`` on generated pickles: a real snapshot with parts replaced, bytes
flipped or cut, and plain data of any shape. Each is summarised or refused with exit 3."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.support import FUZZ, run_cli
from tests.fuzz.test_fuzz_documents import _like, _paths, _replace, json_values
from tests.snapshot.synthetic import finetune_oom_after_eval

SNAPSHOT_KEYS = ["segments", "device_traces", "allocator_settings", "blocks", "frames", "size",
                 "total_size", "address", "state", "action", "addr", "time_us", "device",
                 "segment_type", "requested_size", "history", "stream"]

plain = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(), st.text(max_size=10), st.binary(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                            st.dictionaries(st.sampled_from(SNAPSHOT_KEYS), inner, max_size=5),
                            st.frozensets(st.integers(), max_size=3)),
    max_leaves=15,
)


@pytest.fixture(scope="module")
def base_snapshot() -> dict[str, Any]:
    return finetune_oom_after_eval()


@st.composite
def pickles(draw, base: dict[str, Any]) -> bytes:
    kind = draw(st.sampled_from(["mutated", "mutated", "bytes", "plain"]))
    protocol = draw(st.integers(min_value=0, max_value=pickle.HIGHEST_PROTOCOL))
    if kind == "plain":
        return pickle.dumps(draw(plain), protocol=protocol)
    if kind == "mutated":
        data = copy.deepcopy(base)
        for _ in range(draw(st.integers(min_value=1, max_value=4))):
            path = draw(st.sampled_from(_paths(data)[1:]))
            old = data
            for step in path:
                old = old[step]
            data = _replace(data, path, _like(draw, old) if draw(st.booleans())
                            else draw(st.one_of(json_values, plain)))
        return pickle.dumps(data, protocol=protocol)
    raw = bytearray(pickle.dumps(base, protocol=protocol))
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        index = draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[index] = draw(st.integers(min_value=0, max_value=255))
    return bytes(raw[: draw(st.integers(min_value=1, max_value=len(raw)))])


@FUZZ
@given(data=st.data())
def test_any_snapshot_pickle(data, base_snapshot, tmp_path_factory):
    path = tmp_path_factory.mktemp("snap") / "oom.pickle"
    path.write_bytes(data.draw(pickles(base_snapshot)))
    outcome = run_cli(["snapshot", str(path), "--json", "--no-report"], allowed=(0, 3))
    if outcome.code == 3:
        assert outcome.stderr.startswith("gpu-audit: "), outcome.stderr
