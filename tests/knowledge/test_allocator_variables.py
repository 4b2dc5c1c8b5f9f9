"""Which allocator variable each torch release reads, and the quoted lines that set it."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from gpu_audit.knowledge import allocator as ac
from gpu_audit.units import torch_release


def test_torch_release_reads_release_nightly_and_local_versions():
    assert torch_release("2.9.1+cu128") == (2, 9)
    assert torch_release("2.12.0.dev20260301+cu130") == (2, 12)
    assert torch_release("2.10.0a0+git1234") == (2, 10)
    assert torch_release(None) is None
    assert torch_release("garbage") is None


# ------------------------------------------------------------------------------ which variable


@pytest.mark.parametrize("version,era,warns", [
    ((2, 8), "legacy", False), ((2, 9), "split", True), ((2, 10), "unified", True),
    ((2, 11), "alias", False), ((2, 12), "alias", False), ((2, 13), "alias", False),
    (None, "unknown", False),
])
def test_env_behaviour_by_release(version, era, warns):
    behaviour = ac.env_behaviour(version)
    assert (behaviour.era, behaviour.warns_on_old_name) == (era, warns)


def test_resolve_new_name_alone_is_ignored_up_to_2_9():
    for version in ((2, 5), (2, 9)):
        res = ac.resolve(None, "expandable_segments:True", version)
        assert res.text is None and res.ignored == [ac.NEW_VAR]
    res = ac.resolve(None, "expandable_segments:True", (2, 10))
    assert res.text == "expandable_segments:True" and res.ignored == []


def test_resolve_old_name_wins_from_2_11_even_when_empty():
    for version in ((2, 11), (2, 13)):
        res = ac.resolve("", "expandable_segments:True", version)
        assert res.text == "" and res.ignored == [ac.NEW_VAR]
        res = ac.resolve("expandable_segments:False", "expandable_segments:True", version)
        assert res.text == "expandable_segments:False" and res.ignored == [ac.NEW_VAR]


def test_2_11_is_read_as_seen_on_a_gpu():
    behaviour = ac.env_behaviour((2, 11))
    assert behaviour.confirmed and not behaviour.warns_on_old_name
    assert "reads PYTORCH_CUDA_ALLOC_CONF first (an alias, no warning)" in behaviour.summary
    assert not ac.env_behaviour((2, 12)).confirmed  # not seen: read from the source


def test_resolve_2_10_merges_shared_keys_from_new_and_cuda_keys_from_old():
    res = ac.resolve("backend:cudaMallocAsync,max_split_size_mb:64",
                     "expandable_segments:True,backend:native", (2, 10))
    parsed = ac.analyse(res.text)
    assert parsed.value("expandable_segments") is True
    assert parsed.value("backend") == "cudaMallocAsync"
    assert not parsed.has("max_split_size_mb")


# ------------------------------------------------------------------------------ lines to paste


def test_export_line_sets_both_names_from_2_9_and_quotes_for_the_shell():
    conf = "roundup_power2_divisions:[256:1,>:4]"
    assert ac.export_line(conf, (2, 5)) == f"export PYTORCH_CUDA_ALLOC_CONF='{conf}'"
    both = ac.export_line(conf, (2, 9))
    assert both == f"export PYTORCH_ALLOC_CONF='{conf}' PYTORCH_CUDA_ALLOC_CONF='{conf}'"
    assert ac.export_line(conf, None) == both
    assert ac.export_line("", (2, 13)) == "unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF"
    assert ac.shell_quote("a'b") == "'a'\"'\"'b'"
    assert ac.alloc_conf_export(conf, "2.5.1+cu124") == ac.export_line(conf, (2, 5))
    assert ac.alloc_conf_variables("2.8.0") == (ac.CUDA_VAR,)
    assert ac.alloc_conf_variables(None) == (ac.NEW_VAR, ac.CUDA_VAR)


@pytest.mark.parametrize("conf", ["roundup_power2_divisions:[256:1,>:4],expandable_segments:True",
                                  "a'b:$HOME;`x`", "max_split_size_mb:128"])
@pytest.mark.parametrize("version", [(2, 5), (2, 9), None])
def test_a_shell_gives_each_variable_the_whole_string(conf, version):
    line = ac.export_line(conf, version)
    words = shlex.split(line)
    assert words[0] == "export"
    assert {word.partition("=")[2] for word in words[1:]} == {conf}
    if shutil.which("bash") is None:
        return
    names = ac.variables_to_set(version)
    echo = "; ".join(f'printf "%s\\n" "${name}"' for name in names)
    out = subprocess.run(["bash", "-c", f"{line}; {echo}"], capture_output=True, text=True,
                         check=True, env={"PATH": os.environ.get("PATH", "")})
    assert out.stdout.splitlines() == [conf] * len(names)


def test_fragmentation_remedy_fits_the_release():
    assert "max_split_size_mb" in ac.fragmentation_remedy("1.13.1")
    assert ac.fragmentation_remedy("2.4.0") == (
        "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'")


# ------------------------------------------------------------------- confirmed on a real GPU

_SETTINGS_PROBE = (
    "import json, torch\n"
    "try:\n"
    "    torch.zeros(1, device='cuda')\n"
    "    s = torch.cuda.memory._snapshot()['allocator_settings']\n"
    "    print(json.dumps({'expandable': bool(s.get('expandable_segments'))}))\n"
    "except Exception as exc:\n"
    "    print(json.dumps({'error': f'{type(exc).__name__}: {exc}'}))\n"
)


def _cuda_child(cuda: str | None, new: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (ac.CUDA_VAR, ac.NEW_VAR)}
    for name, value in ((ac.CUDA_VAR, cuda), (ac.NEW_VAR, new)):
        if value is not None:
            env[name] = value
    out = subprocess.run([sys.executable, "-c", _SETTINGS_PROBE], env=env, capture_output=True,
                         text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _installed_torch() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.gpu
@pytest.mark.parametrize("cuda,new", [
    (None, "expandable_segments:True"),
    ("expandable_segments:True", None),
    ("", "expandable_segments:True"),
    ("expandable_segments:False", "expandable_segments:True"),
    ("expandable_segments:True", "expandable_segments:False"),
])
def test_the_variable_that_reaches_the_cuda_allocator_is_the_one_we_predict(cuda, new):
    version = _installed_torch()
    resolution = ac.resolve(cuda, new, torch_release(version))
    predicted = ac.analyse(resolution.text or "").value("expandable_segments") is True
    seen = _cuda_child(cuda, new)
    assert seen == {"expandable": predicted}, (version, resolution)


@pytest.mark.gpu
@pytest.mark.parametrize("text", [
    "max_split_size_mb:19", "max_split_size_mb:20", "max_split_size_mb:21",
    "expandable_segment:True", "backend:foo", "pinned_num_register_threads:3",
    "expandable_segments:true", "garbage_collection_threshold:1.5",
])
def test_our_errors_are_exactly_the_strings_torch_refuses_on_a_cuda_build(text):
    version = _installed_torch()
    refused = "error" in _cuda_child(text, text)
    assert refused == bool(ac.analyse(text, version).errors), (version, text)


def test_the_deprecation_warning_releases_are_one_fact_quoted_everywhere():
    """explain's reading of the warning and `gpu-audit rules alloc-conf-deprecated-name` say
    the same releases, both from DEPRECATION_WARNING_RELEASES."""
    from gpu_audit.cli.rules import all_entries
    from gpu_audit.knowledge.allocator import variables
    from tests.explain.helpers import fixture_incidents

    releases = variables.deprecation_warning_releases()
    assert releases == "2.9 and 2.10" and variables.deprecation_alias_release() == "2.11"
    assert [v for v in ((2, 8), (2, 9), (2, 10), (2, 11), (2, 12), (2, 13))
            if ac.env_behaviour(v).warns_on_old_name] == [(2, 9), (2, 10)]
    doc = all_entries()["alloc-conf-deprecated-name"].sections
    assert f"torch {releases} print this" in doc.meaning
    assert "From 2.11 the old name" in doc.meaning
    (incident,) = fixture_incidents("torch29_deprecated_alloc_conf_healthy.log")
    assert f"torch {releases} print this" in incident.explanation
    assert "and later" not in incident.explanation
