from __future__ import annotations

import json

import pytest

from gpu_audit.errors import InputError
from gpu_audit.model import Scan
from gpu_audit.serial import _float_hinted, dumps, encode, from_jsonable, to_jsonable, write_atomic
from tests import builders as b


def test_snapshot_survives_a_json_round_trip():
    scan = b.gtx1650_three_uvicorn()
    again = from_jsonable(Scan, json.loads(dumps(scan)))
    assert again == scan


def test_loading_names_the_bad_field():
    data = to_jsonable(b.scan())
    data["gpus"][0]["memory_total_bytes"] = "lots"
    with pytest.raises(InputError, match=r"\$\.gpus\[0\]\.memory_total_bytes"):
        from_jsonable(Scan, data)
    data["gpus"][0]["memory_total_bytes"] = 1
    del data["host"]
    with pytest.raises(InputError, match="missing field 'host'"):
        from_jsonable(Scan, data)


def test_unknown_is_null_never_zero_or_na():
    data = to_jsonable(b.scan(gpus=[b.gpu(0, power_draw_w=None)]))
    assert data["gpus"][0]["power_draw_w"] is None


def test_atomic_write_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "deep" / "report.md"
    write_atomic(target, "first")
    write_atomic(target, "second")
    assert target.read_text() == "second"
    assert [p.name for p in target.parent.iterdir()] == ["report.md"]


FLOATS = [1e16, 1e17, 1e300, 1e-05, -1e-07, 0.00001, 5e-324, 2.5e-10, 0.0001, 0.1, 123.5, -0.0,
          1e15]


@pytest.mark.parametrize("value", FLOATS)
def test_floats_keep_pythons_spelling_wherever_they_stand(value):
    for doc in (value, [value], {"a": value}, {"s": "GPU-1e2e", "n": [1, value]}):
        assert json.loads(encode(doc)) == json.loads(json.dumps(doc))
        assert repr(value).encode() in encode(doc)


def test_digits_before_an_e_inside_strings_are_no_float_hint():
    # UUIDs and hashes: the whole document would be re-tokenised for nothing.
    assert not _float_hinted(b'{"uuid":"GPU-00001e2e-3e4f","v":"0.00001","n":[1,2.5]}')
    for raw in (b"1e16", b"[1e-05]", b'{"a":-1e16}', b'{"a":1,"b":0.00001}'):
        assert _float_hinted(raw), raw


def test_the_float_hint_finds_what_its_anchored_form_finds():
    """The hint is searched from the character before a value, a bare number apart: on any
    text it fires exactly where ``(?:^|[:,\\[])...`` would."""
    import random
    import re

    from gpu_audit import serial

    anchored = re.compile(rb"(?:^|[:,\[])-?(?:\d+(?:\.\d+)?[eE]|0\.0000)")
    rng = random.Random(5)
    pieces = [b"1", b"0", b".", b"e", b"E", b"-", b":", b",", b"[", b"{", b'"', b"0.0000", b"x"]
    for _ in range(20_000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert serial._float_hinted(raw) == bool(anchored.search(raw)), raw
