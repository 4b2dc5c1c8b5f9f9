"""Command lines shortened between whole arguments, keeping what tells copies apart."""

from __future__ import annotations

import pytest

from gpu_audit.rules.cmdline import command_head, short_command

UVICORN = ["/srv/api/.venv/bin/python3", "/srv/api/.venv/bin/uvicorn", "app.main:app",
           "--host", "0.0.0.0", "--workers", "4", "--port", "8000"]
MODULE = ["/srv/api/.venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model",
          "meta-llama/Llama-3.1-8B-Instruct", "--port", "8001"]
TORCHRUN = ["/opt/conda/bin/python", "-u", "/home/alice/train.py", "--config", "big.yaml",
            "--local-rank=3"]


def test_whole_when_it_fits():
    assert short_command(UVICORN, 200) == " ".join(UVICORN)


@pytest.mark.parametrize("width", range(12, 90))
def test_never_wider_than_asked_and_cut_only_between_arguments(width):
    for argv in (UVICORN, MODULE, TORCHRUN):
        text = short_command(argv, width)
        assert len(text) <= width
        known = {a.rsplit("/", 1)[-1] for a in argv} | set(argv) | {"…"}
        words = text.split(" ")
        if words[0] not in known:  # only a script or module wider than the column is cut
            assert len(words) == 1 and text.endswith("…") and len(text) == width
            continue
        assert all(w in known for w in words), (text, argv)


@pytest.mark.parametrize(("argv", "width", "expected"), [
    (UVICORN, 60, "python3 uvicorn app.main:app --host 0.0.0.0 … --port 8000"),
    (UVICORN, 42, "python3 uvicorn app.main:app … --port 8000"),
    (UVICORN, 30, "python3 uvicorn … --port 8000"),
    (UVICORN, 24, "uvicorn … --port 8000"),
    (MODULE, 60, "python3 -m vllm.entrypoints.openai.api_server … --port 8001"),
    (MODULE, 50, "vllm.entrypoints.openai.api_server … --port 8001"),
    (TORCHRUN, 35, "python -u train.py … --local-rank=3"),
    (TORCHRUN, 30, "train.py … --local-rank=3"),
])
def test_the_script_module_and_distinguishing_arguments_stay(argv, width, expected):
    assert short_command(argv, width) == expected


def test_a_flag_is_never_left_without_its_value():
    for width in range(10, 70):
        words = short_command(UVICORN, width).split(" ")
        for flag in ("--host", "--workers", "--port"):
            if flag in words:
                i = words.index(flag)
                assert i + 1 < len(words) and words[i + 1] not in ("…",), (width, words)


def test_the_head_of_a_command_ends_at_an_argument_boundary():
    argv = ["/usr/bin/python", "uvicorn", "app:app", "--host", "127.0.0.1", "--port", "8000"]
    assert command_head(argv, 4) == "/usr/bin/python uvicorn app:app --host 127.0.0.1"
    assert command_head(argv, 3) == "/usr/bin/python uvicorn app:app"
    assert command_head(["a"], 4) == "a"
