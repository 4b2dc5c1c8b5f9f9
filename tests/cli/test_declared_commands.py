"""Every command's options are declared once (gpu_audit.cli.declared) and typer's app is built
from the declarations; the flags that set a configuration key come from the settings schema."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.cli import app as cli_app
from gpu_audit.cli.declared import DECLARED, given
from gpu_audit.config import schema

CLI = Path(cli_app.__file__).parent


def _load_all() -> None:
    for module in cli_app.COMMANDS.values():
        importlib.import_module(f"gpu_audit.cli.{module}")


def test_every_command_is_declared() -> None:
    _load_all()
    names = {name.split(" ")[0] for name in DECLARED}
    assert names == set(cli_app.COMMANDS)
    assert {"fleet scan", "fleet check"} <= set(DECLARED)


def test_no_command_module_builds_typer_options_itself() -> None:
    for path in CLI.glob("*.py"):
        if path.name in ("typer_app.py", "app.py"):
            continue
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        assert "typer" not in imported, path.name


def test_every_flag_the_schema_names_is_declared_by_a_command_that_reads_it() -> None:
    _load_all()
    declared = {(name.split(" ")[0], o.name, o.key) for name, d in DECLARED.items()
                for o in d.options}
    for item in schema.SETTINGS:
        if item.flag is None or item.flag.startswith("-- "):
            continue
        readers = {c for (c, flag, key) in declared if flag == item.flag and key == item.key}
        assert readers, f"{item.key}: {item.flag} is declared by no command"
        assert readers <= set(item.commands), (item.key, readers)


def test_flags_that_set_a_key_show_the_schemas_default() -> None:
    _load_all()
    cycles = next(o for o in DECLARED["validate"].options if o.name == "--cycles")
    assert cycles.help.endswith(f"(default: {schema.setting(schema.VALIDATE, 'cycles').default}).")
    fail_on = next(o for o in DECLARED["scan"].options if o.name == "--fail-on")
    assert fail_on.help.endswith("(default: error).") and fail_on.default is None


@pytest.mark.parametrize(("args", "expected"), [
    (["--json", "--format", "nagios"], "nagios"),
    (["--format=NAGIOS", "--timeout", "x"], "NAGIOS"),
    (["--format", "json", "--format", "nagios"], "nagios"),
    (["--from", "--format", "nagios"], None),  # "--format" is --from's value here
    (["--format"], ""),
    (["--timeout", "nan"], None),
])
def test_given_reads_a_refused_line_with_the_declarations(args: list[str], expected) -> None:
    _load_all()
    assert given(DECLARED["scan"], args, "output_format") == expected


def test_a_float_option_refuses_nan_without_patching_click(cli_env, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "diff", "a.json", "b.json",
                           "--unreleased-min-gib", "nan"], env=cli_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    assert "'nan' is not a finite number" in done.stderr
    assert "Traceback" not in done.stderr
