"""``gpu-audit merge`` told whom to expect (``--expect N``, ``--expect-nodes NODELIST``,
``--expect-ray``) names the nodes that sent no document, in the terminal, the markdown report
and the JSON document, and does not pass as OK."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from gpu_audit import bounds
from gpu_audit.errors import UsageError
from gpu_audit.fleet.expect import Expected, expand_hostlist, expectation
from tests.fleet.synth import node_document, write_documents
from tests.fleet.test_merge_cli import gpu_audit


@pytest.mark.parametrize(("text", "names"), [
    ("gpu[001-004,010],login1",
     ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "login1"]),
    ("node1", ["node1"]),
    ("gpu[8-11]", ["gpu8", "gpu9", "gpu10", "gpu11"]),
    ("rack[1-2]-gpu[01-02]", ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]),
    ("a,b a, ,a", ["a", "b"]),  # spaces separate too; each name once
    ("gpu[1-2].cluster.local", ["gpu1.cluster.local", "gpu2.cluster.local"]),
    ("gpu[7]", ["gpu7"]),
])
def test_host_lists_expand_as_slurm_writes_them(text, names):
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(("text", "message"), [
    ("gpu[1-3", "'[' without ']'"),
    ("gpu1-3]", "']' without '['"),
    ("gpu[[1-3]]", "nested '['"),
    ("gpu[3-1]", "runs backwards"),
    ("gpu[a-c]", "is not a number"),
    ("gpu[]", "is not a number"),
    ("gpu;rm -rf /", "is not a host name"),
    ("gpu[1-2]$x", "is not a host name"),
    (" , ", "no host names"),
    ("gpu[1-" + "9" * 40 + "]", "is not a number"),
])
def test_malformed_host_lists_are_usage_errors(text, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("$", r"\$")):
        expand_hostlist(text)


def test_a_host_list_past_the_ceiling_is_refused_before_it_is_expanded():
    with pytest.raises(UsageError, match="more than 100000 hosts"):
        expand_hostlist("a[0-999999999999]b[0-999999999999]")  # 10**24 names, refused at once
    with pytest.raises(UsageError, match="more than 4 hosts"):
        expand_hostlist("g[1-2],h[1-3]", limit=4)
    assert len(expand_hostlist(f"g[1-{bounds.MAX_FLEET_NODES}]")) == bounds.MAX_FLEET_NODES
    with pytest.raises(UsageError, match="characters"):
        expand_hostlist("a," * bounds.MAX_HOSTLIST_CHARS)


def test_names_match_case_blind_with_or_without_the_domain():
    told = expectation(Expected(names=("GPU001", "gpu002.cluster", "gpu003")),
                       ["gpu001.cluster.local", "gpu002"], found=2)
    assert told.missing == ["gpu003"] and told.missing_count == 1 and told.expected == 3
    counted = expectation(Expected(count=5), ["x", "y"], found=4)
    assert counted.missing == [] and counted.missing_count == 1


def docs(tmp_path: Path, hosts: list[str]) -> Path:
    write_documents(tmp_path / "run", [node_document(i, gpus=1, hostname=h)
                                       for i, h in enumerate(hosts)])
    return tmp_path / "run"


def test_merge_names_missing_nodes_everywhere(tmp_path, cli_env):
    run = docs(tmp_path, ["gpu001", "gpu002", "gpu004.cluster.local"])
    result = gpu_audit("merge", str(run), "--expect-nodes", "gpu[001-004,010],login1",
                       "--out", str(tmp_path / "out"), env=cli_env, cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("fleet UNKNOWN: 3 nodes, 3 fit")
    assert "3 missing of 6 expected" in result.stdout
    for name in ("gpu003", "gpu010", "login1"):
        assert f"MISSING  {name}: expected, sent no document" in result.stdout
    assert "gpu004" not in result.stdout.split("MISSING", 1)[1]
    (md,) = (tmp_path / "out").glob("merge-*.md")
    assert "- MISSING  login1: expected, sent no document" in md.read_text()
    fleet = json.loads(md.with_suffix(".json").read_text())
    assert fleet["expected"] == {"count": 6, "found": 3, "missing_count": 3,
                                 "missing": ["gpu003", "gpu010", "login1"],
                                 "sources": ["--expect-nodes"]}
    (missing,) = [f for f in fleet["findings"] if f["id"] == "fleet-nodes-missing"]
    assert missing["severity"] == "error" and missing["evidence"]["missing"] == \
        ["gpu003", "gpu010", "login1"]
    assert missing["title"].startswith("3 of 6 expected nodes sent no document: gpu003")


def test_merge_with_a_count_or_everyone_present(tmp_path, cli_env):
    run = docs(tmp_path, ["a1", "a2"])
    short = gpu_audit("merge", str(run), "--expect", "3", "--json", "--no-report", env=cli_env)
    fleet = json.loads(short.stdout)
    assert short.returncode == 3 and fleet["status"] == "UNKNOWN"
    assert fleet["expected"]["missing_count"] == 1 and fleet["expected"]["missing"] == []
    text = gpu_audit("merge", str(run), "--expect", "3", "--no-report", env=cli_env)
    assert "MISSING  1 of 3 expected nodes sent no document (2 found)" in text.stdout
    whole = gpu_audit("merge", str(run), "--expect", "2", "--expect-nodes", "a[1-2]", "--json",
                      "--no-report", env=cli_env)
    fleet = json.loads(whole.stdout)
    assert whole.returncode == 0 and fleet["status"] == "OK"
    assert fleet["expected"]["missing_count"] == 0
    assert "fleet-nodes-missing" not in {f["id"] for f in fleet["findings"]}
    plain = gpu_audit("merge", str(run), "--json", "--no-report", env=cli_env)
    assert json.loads(plain.stdout)["expected"] is None


def test_an_unfit_node_still_wins_over_missing_ones(tmp_path, cli_env):
    write_documents(tmp_path / "run", [node_document(0, gpus=1, status="CRITICAL")])
    result = gpu_audit("merge", str(tmp_path / "run"), "--expect", "4", "--no-report",
                       env=cli_env)
    assert result.returncode == 2 and "3 missing of 4 expected" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--expect-nodes", "gpu[1-3"], "--expect-nodes: '[' without ']'"),
    (["--expect-nodes", "g[0-99999999]"], "more than 100000 hosts"),
])
def test_bad_expectations_are_exit_3_with_one_line(tmp_path, cli_env, args, message):
    run = docs(tmp_path, ["a1"])
    result = gpu_audit("merge", str(run), *args, "--no-report", env=cli_env)
    assert result.returncode == 3 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_expect_ray_reads_the_clusters_alive_nodes(tmp_path, monkeypatch, capsys):
    """In-process, with the Ray cluster's node list answered by a stand-in."""
    from gpu_audit.cli import merge
    from gpu_audit.collect import ray_fanout

    asked = []

    def alive(address, timeout_s):
        asked.append(address)
        return ["node-a", "node-b", "node-c"]

    monkeypatch.setattr(ray_fanout, "alive_hostnames", alive)
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))  # importable
    run = docs(tmp_path, ["node-a", "node-c"])
    code = merge.merge(paths=[run], expect=None, expect_nodes=None, expect_ray=True,
                       json_out=True, out=None, no_report=True)
    fleet = json.loads(capsys.readouterr().out)
    assert code == 3 and asked == [None]
    assert fleet["expected"]["missing"] == ["node-b"]
    assert fleet["expected"]["sources"] == ["the Ray cluster's alive nodes"]


def test_expect_ray_without_ray_says_how_to_get_it(tmp_path, cli_env):
    shadow = tmp_path / "no-ray"
    (shadow / "ray").mkdir(parents=True)
    (shadow / "ray" / "__init__.py").write_text("raise ImportError('no ray')\n")
    run = docs(tmp_path, ["a1"])
    env = {**cli_env, "PYTHONPATH": f"{shadow}:{cli_env['PYTHONPATH']}"}
    result = gpu_audit("merge", str(run), "--expect-ray", "--no-report", env=env)
    assert result.returncode == 3, result.stderr
    assert "--expect-ray needs Ray, which is not installed here" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
