"""Layers run one way, as the import contracts of ``pyproject.toml`` declare.

import-linter checks the contracts (``[tool.importlinter]``; ARCHITECTURE.md explains the
layers): imports inside functions count, since a lazy import still runs, and so do the names a
package exports lazily (``tests/import_contracts.py``). What import-linter cannot say is
checked here too: a package's ``__init__`` only exports.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "gpu_audit"
CHECKER = Path(__file__).resolve().parent / "import_contracts.py"


def check_contracts(root: Path) -> subprocess.CompletedProcess[str]:
    """The contracts of ``root/pyproject.toml`` checked over ``root/gpu_audit``, in a child
    process: the graph is built from the package the child imports, not the one loaded here."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "300"}  # one line per contract
    return subprocess.run([sys.executable, str(CHECKER)], cwd=root, env=env, text=True,
                          capture_output=True, timeout=300)


def test_import_contracts_hold() -> None:
    result = check_contracts(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


# What to append to which module (created if missing), and what the report must then say: the
# contract broken and the import (or module) that broke it. One copy of the package holds them
# all, so the contracts are built and checked once.
PLANTED = {
    "an analysis module importing a command": (
        "rules/planted.py", "from gpu_audit.cli import app",
        "Data flows one way", "gpu_audit.rules.planted -> gpu_audit.cli.app"),
    "the training process taking a plan through a lazy export": (
        "validate/workloads/planted.py", "from gpu_audit.validate import build_plan",
        "Code running inside the training process imports only the base",
        "gpu_audit.validate.workloads.planted -> gpu_audit.validate.plan"),
    "a judge importing its feature's renderer": (
        "diff/compare.py", "from gpu_audit.diff import render",
        "Inside a feature: the command runs", "gpu_audit.diff.compare -> gpu_audit.diff.render"),
    "a module in no layer": (
        "planted.py", "from gpu_audit import errors",
        "Data flows one way", "are not listed as layers:\n\n- gpu_audit.planted\n"),
}


@pytest.fixture(scope="module")
def planted_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("planted")
    shutil.copytree(PACKAGE, root / "gpu_audit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root)
    for path, source, _, _ in PLANTED.values():
        with (root / "gpu_audit" / path).open("a", encoding="utf-8") as planted:
            planted.write(f"\n{source}\n")
    result = check_contracts(root)
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("case", list(PLANTED))
def test_a_planted_import_breaks_its_contract(case: str, planted_report: str) -> None:
    _, _, contract, named = PLANTED[case]
    broken = [line for line in planted_report.splitlines() if "BROKEN" in line]
    assert any(line.startswith(contract) for line in broken), planted_report
    assert named in planted_report, planted_report


def _is_type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"


INITS = sorted(PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("path", INITS, ids=[str(p.relative_to(REPO)) for p in INITS])
def test_init_files_only_export(path: Path) -> None:
    """A package's ``__init__`` holds its docstring, imports, ``__all__`` and lazy-export
    tables: no functions, classes or statements, so a reader finds the code where it is named."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = tree.body[1:] if ast.get_docstring(tree) else tree.body
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _is_type_checking_block(node):
            continue
        targets = [getattr(e, "id", None) for t in getattr(node, "targets", [])
                   for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        if isinstance(node, ast.AnnAssign):
            targets = [getattr(node.target, "id", None)]
        assert isinstance(node, (ast.Assign, ast.AnnAssign)), (
            f"{path}: line {node.lineno} is logic; move it to a module and re-export it")
        assert all(t and (t.isupper() or t.startswith("__")) for t in targets), (
            f"{path}: line {node.lineno} assigns {targets}; only export tables belong here")
