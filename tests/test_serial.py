from __future__ import annotations

import json

import pytest

from gpu_audit.errors import InputError
from gpu_audit.model import Scan
from gpu_audit.serial import dumps, from_jsonable, to_jsonable, write_atomic
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
