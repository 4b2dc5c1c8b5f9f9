"""Check the import contracts of ``pyproject.toml`` (``[tool.importlinter]``) over gpu-audit.

``lint-imports`` sees ``from gpu_audit.validate import build_plan`` as an import of the package
``gpu_audit.validate`` only, because the name is exported lazily (``gpu_audit.lazy.exports``);
a lazy import still runs, so here it counts as an import of the module that defines the name,
as the package's export table says. Run from the directory holding ``gpu_audit`` and
``pyproject.toml``: ``python -m tests.import_contracts`` (exit 0: every contract kept).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import grimp
from importlinter.adapters.building import GraphBuilder
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure, settings

ROOT = "gpu_audit"


def lazy_exports(init: Path) -> dict[str, str]:
    """Name -> defining module, from the ``{"Name": "gpu_audit.module"}`` tables of an
    ``__init__.py`` (the lazy exports); empty for a package without one."""
    table: dict[str, str] = {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and isinstance(value, ast.Constant)
                        and str(value.value).startswith(ROOT + ".")):
                    table[key.value] = value.value
    return table


def module_path(package_dir: Path, module: str) -> Path:
    rel = Path(*module.split(".")[1:])
    path = package_dir / rel / "__init__.py"
    return path if path.is_file() else (package_dir / rel).with_suffix(".py")


def lazy_imports(package_dir: Path, module: str,
                 tables: dict[str, dict[str, str]]) -> list[tuple[str, int]]:
    """(defining module, line) for each name ``module`` takes from a lazy export table."""
    path = module_path(package_dir, module)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join([*base, *([node.module] if node.module else [])])
        else:
            target = node.module or ""
        table = tables.get(target, {})
        found.extend((table[a.name], node.lineno) for a in node.names if a.name in table)
    return found


def add_lazy_exports(graph: grimp.ImportGraph, package_dir: Path) -> None:
    packages = [m for m in graph.modules if module_path(package_dir, m).name == "__init__.py"]
    tables = {p: t for p in packages if (t := lazy_exports(module_path(package_dir, p)))}
    for module in sorted(graph.modules):
        for target, line in lazy_imports(package_dir, module, tables):
            if target != module and target in graph.modules:
                graph.add_import(importer=module, imported=target, line_number=line,
                                 line_contents=f"(lazy export) {target}")


class LazyExportsGraphBuilder(GraphBuilder):
    """grimp's graph plus the imports that go through a lazy export table."""

    def build(self, root_package_names: list[str], cache_dir: str | None,
              include_external_packages: bool = False,
              exclude_type_checking_imports: bool = False) -> grimp.ImportGraph:
        graph = super().build(root_package_names, None, include_external_packages,
                              exclude_type_checking_imports)
        spec = importlib.util.find_spec(ROOT)
        assert spec and spec.submodule_search_locations
        add_lazy_exports(graph, Path(next(iter(spec.submodule_search_locations))))
        return graph


def main() -> int:
    configure()
    settings.configure(GRAPH_BUILDER=LazyExportsGraphBuilder())
    kept = lint_imports(config_filename="pyproject.toml", cache_dir=None, no_logo=True)
    return 0 if kept else 1


if __name__ == "__main__":
    sys.exit(main())
