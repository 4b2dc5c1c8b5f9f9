"""Layers run one way: collect -> model -> analysis -> renderers -> commands.

Every module of the package belongs to one layer, and may import only from the layers this
table allows (imports inside functions count: a lazy import still runs). The code that runs
inside the user's training process (the monitor, ``retry_on_oom``, the validation worker)
imports only the base, so nothing the analysis needs ever loads there, and nothing that
judges ever drags that code in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpu_audit"

BASE, COLLECT, ANALYSIS, RENDER, RUNTIME, COMMANDS = (
    "base", "collect", "analysis", "render", "runtime", "commands")

# Module name prefixes, most specific first. A module matches the longest prefix.
LAYER_OF = {
    "gpu_audit": BASE,  # the package itself: lazy exports only
    "gpu_audit.errors": BASE, "gpu_audit.units": BASE, "gpu_audit.lazy": BASE,
    "gpu_audit.serial": BASE, "gpu_audit.redact": BASE, "gpu_audit.model": BASE,
    "gpu_audit.knowledge": BASE,
    "gpu_audit.inputs": BASE,
    "gpu_audit.bounds": BASE,  # the ceilings on every input, applied where it is parsed
    "gpu_audit.trust": BASE,  # the trust rule for files read back; state folders by descriptor
    "gpu_audit.publication": BASE,  # the monitor publication format: writer and reader share it
    "gpu_audit.gpu_selection": BASE,  # --gpus: which GPUs a run judges (pure)
    "gpu_audit.collect": COLLECT,
    "gpu_audit.snapshot.load": COLLECT,
    "gpu_audit.rules": ANALYSIS, "gpu_audit.check": ANALYSIS, "gpu_audit.explain": ANALYSIS,
    "gpu_audit.config": ANALYSIS, "gpu_audit.snapshot": ANALYSIS, "gpu_audit.fleet": ANALYSIS,
    "gpu_audit.validate": ANALYSIS,
    "gpu_audit.report": RENDER,
    "gpu_audit.check.terminal": RENDER, "gpu_audit.check.document": RENDER,
    "gpu_audit.explain.render": RENDER, "gpu_audit.explain.reference": RENDER,
    "gpu_audit.snapshot.render": RENDER, "gpu_audit.snapshot.plot": RENDER,
    "gpu_audit.validate.report": RENDER, "gpu_audit.validate.progress": RENDER,
    "gpu_audit.validate.plots": RENDER,
    "gpu_audit.fleet.render": RENDER,
    "gpu_audit.diff": ANALYSIS, "gpu_audit.diff.render": RENDER,
    "gpu_audit.monitor": RUNTIME, "gpu_audit.oom": RUNTIME, "gpu_audit.chunked": RUNTIME,
    "gpu_audit.validate.worker": RUNTIME, "gpu_audit.validate.stage": RUNTIME,
    "gpu_audit.validate.device": RUNTIME, "gpu_audit.validate.telemetry": RUNTIME,
    "gpu_audit.validate.protocol": RUNTIME, "gpu_audit.validate.workloads": RUNTIME,
    "gpu_audit.validate.channels": RUNTIME, "gpu_audit.validate.spawn": RUNTIME,
    "gpu_audit.validate.state": RUNTIME, "gpu_audit.validate.checkpoints": RUNTIME,
    "gpu_audit.validate.leg": RUNTIME,
    "gpu_audit.validate.script.hook": RUNTIME, "gpu_audit.validate.script.inject": RUNTIME,
    "gpu_audit.validate.script.supervisor": RUNTIME, "gpu_audit.validate.script.streams": RUNTIME,
    "gpu_audit.validate.script.outside": RUNTIME, "gpu_audit.validate.script.launch": RUNTIME,
    "gpu_audit.validate.script.output": RUNTIME,
    "gpu_audit.cli": COMMANDS, "gpu_audit.__main__": COMMANDS,
    "gpu_audit.schemas": COMMANDS,  # every document type, for the published JSON Schemas
    "gpu_audit.validate.runner": COMMANDS, "gpu_audit.validate.start": COMMANDS,
    "gpu_audit.validate.checklist": COMMANDS,
    "gpu_audit.explain.files": COMMANDS, "gpu_audit.explain.sources": COMMANDS,
    "gpu_audit.explain.parallel": COMMANDS,
    "gpu_audit.fleet.ray": COMMANDS,
    "gpu_audit.hooks": COMMANDS,  # scheduler hooks: orchestrate collect, judge, spool state
    "gpu_audit.diag": ANALYSIS,
    "gpu_audit.diag.render": RENDER, "gpu_audit.diag.plots": RENDER,
    "gpu_audit.diag.worker": RUNTIME, "gpu_audit.diag.probes": RUNTIME,
    "gpu_audit.diag.memtest": RUNTIME, "gpu_audit.diag.lifeline": RUNTIME,
    "gpu_audit.diag.runner": COMMANDS, "gpu_audit.diag.supervise": COMMANDS,
    "gpu_audit.diag.checklist": COMMANDS,
}

MAY_IMPORT = {
    BASE: {BASE},
    COLLECT: {BASE, COLLECT},
    ANALYSIS: {BASE, ANALYSIS},
    RENDER: {BASE, ANALYSIS, RENDER},
    RUNTIME: {BASE, RUNTIME},
    COMMANDS: {BASE, COLLECT, ANALYSIS, RENDER, RUNTIME, COMMANDS},
}

# The few edges that cross the table on purpose, each with its reason.
ALLOWED = {
    # The monitor writes its out-of-memory summary with the offline snapshot summariser, which
    # is pure and stdlib-only, so the user's process loads nothing heavier.
    ("gpu_audit.monitor.oom_snapshot", "gpu_audit.snapshot.summary"),
    ("gpu_audit.monitor.oom_snapshot", "gpu_audit.snapshot.render"),
    # The validation worker reads its stage from the checked plan (plain data).
    ("gpu_audit.validate.stage", "gpu_audit.validate.plan"),
    ("gpu_audit.validate.leg", "gpu_audit.validate.plan"),
    ("gpu_audit.validate.state", "gpu_audit.validate.plan"),
    # The script supervisor fills the placeholders of its command from the checked plan.
    ("gpu_audit.validate.script.supervisor", "gpu_audit.validate.script.spec"),
    # A program that is not Python is measured from outside: NVML through its one collector.
    ("gpu_audit.validate.script.outside", "gpu_audit.collect.nvml.deadlines"),
    # The run folder is read back to judge and report a run (its records, not its code).
    ("gpu_audit.validate.findings", "gpu_audit.validate.state"),
    ("gpu_audit.validate.verdict", "gpu_audit.validate.state"),
    ("gpu_audit.validate.report", "gpu_audit.validate.state"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    candidates = [p for p in LAYER_OF if module == p or module.startswith(p + ".")]
    assert candidates, f"{module} is in no layer: add it to LAYER_OF"
    return LAYER_OF[max(candidates, key=len)]


def imported(path: Path) -> set[str]:
    """Every gpu_audit module ``path`` imports, at module level or inside a function.

    A name taken from a package (``from gpu_audit.config import Policy``) counts as an import
    of the module that defines it, as the package's ``__init__`` says (eagerly or lazily).
    """
    found: set[str] = set()
    for target, name in _import_statements(path):
        sub = f"{target}.{name}" if name else target
        if name and _is_module(sub):
            found.add(sub)
        elif name and target in FACADES:
            found.add(facade_names(target).get(name, target))
        else:
            found.add(target)
    return found


def _import_statements(path: Path) -> list[tuple[str, str | None]]:
    """(module, imported name or None) for every import statement in ``path``."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend((a.name, None) for a in node.names if a.name.startswith("gpu_audit"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.startswith("gpu_audit"):
                out.extend((target, a.name) for a in node.names)
    return out


def facade_names(package: str) -> dict[str, str]:
    """Name -> defining module, for the names a package's ``__init__`` exports."""
    path = FACADES[package]
    names = {name: target for target, name in _import_statements(path) if name}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):  # a lazy export table: {"Name": "gpu_audit.module"}
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    names[key.value] = value.value
    return names


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel).is_dir()


MODULES = sorted(PACKAGE.rglob("*.py"))
FACADES = {module_name(p): p for p in MODULES if p.name == "__init__.py"}


IMPLEMENTATION = [p for p in MODULES if p.name != "__init__.py"]


@pytest.mark.parametrize("path", IMPLEMENTATION, ids=[module_name(p) for p in IMPLEMENTATION])
def test_imports_run_one_way(path: Path) -> None:
    module = module_name(path)
    own = layer(module)
    wrong = sorted(
        f"{target} ({layer(target)})" for target in imported(path)
        if layer(target) not in MAY_IMPORT[own] and (module, target) not in ALLOWED
    )
    assert not wrong, f"{module} ({own}) may not import {', '.join(wrong)}"


def test_every_allowed_exception_is_still_needed() -> None:
    edges = {(module_name(p), t) for p in IMPLEMENTATION for t in imported(p)}
    assert not ALLOWED - edges, f"stale exceptions: {sorted(ALLOWED - edges)}"


def _is_type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"


@pytest.mark.parametrize("path", list(FACADES.values()), ids=list(FACADES))
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
