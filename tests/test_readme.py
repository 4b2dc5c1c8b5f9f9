"""The README introduces: short, with the test command CI runs, and links that resolve."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_ci_runs_exactly_the_readme_test_command():
    section = README.split("## Run the tests\n", 1)[1]
    (command,) = re.findall(r"```bash\n(.*?)\n```", section, re.S)[:1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == command


def test_the_test_command_takes_the_cpu_build_of_torch_first():
    command = README.split("## Run the tests\n", 1)[1].split("```bash\n", 1)[1].split("\n")[0]
    first, second = command.split("python3 -m pip install")[1:3]
    assert "torch==" in first and "download.pytorch.org/whl/cpu" in first
    assert "--no-deps" in first  # only torch from there: its dependencies come from PyPI
    assert "requirements-test.txt" in second
    pinned = re.search(r"^torch==([\d.]+)$", (ROOT / "requirements-test.txt").read_text(), re.M)
    assert pinned and f"torch=={pinned.group(1)} " in first  # the version the tests pin


def test_the_readme_is_an_introduction():
    assert len(README.splitlines()) <= 200
    for story in ("gpu-audit explain job.log", "gpu-audit validate --disable-quantum --cycles 50 "
                  "-- python scripts/run_500_cycles_scientific_validation.py --cycles {cycles} "
                  "{quantum}", "$ gpu-audit scan\n"):
        assert story in README


def test_every_link_in_the_readme_resolves():
    for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target
