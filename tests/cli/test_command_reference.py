"""docs/commands/ is generated from the command declarations; it must be current. Regenerate:
``python -m gpu_audit.cli.reference``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.cli import reference

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted(reference.outputs()))
def test_generated_page_is_current(path: Path) -> None:
    current = (ROOT / path).read_text(encoding="utf-8")
    assert current == reference.outputs()[path], \
        f"{path} is stale: run `python -m gpu_audit.cli.reference`"


def test_no_stale_page_is_left_behind() -> None:
    pages = {p.relative_to(ROOT) for p in (ROOT / reference.FOLDER).glob("*.md")}
    assert pages == set(reference.outputs())


def test_every_command_and_visible_option_has_its_page() -> None:
    from gpu_audit.cli.app import COMMANDS

    pages = reference.outputs()
    index = pages[reference.FOLDER / "index.md"]
    commands = reference.declared_commands()
    assert {name.split(" ")[0] for name in commands} == set(COMMANDS)
    for name, declared in commands.items():
        page = pages[reference.FOLDER / reference.page_name(name)]
        assert f"[`gpu-audit {name}`]({reference.page_name(name)})" in index
        for option in declared.options:
            if not option.hidden and not option.argument:
                assert f"| `{option.name}" in page or f"| <code>{option.name}" in page, \
                    (name, option.name)
            if option.hidden:
                assert option.name not in page.split("```")[1], (name, option.name)


def test_a_summary_reads_past_e_g():
    page = reference.outputs()[reference.FOLDER / "diff.md"]
    assert "What changed between two scans of one machine, e.g. before and after a job." in page
