"""Shared helpers for the explain tests: fixture logs and exact byte counts."""

from __future__ import annotations

from pathlib import Path

from gpu_audit.explain import Incident, explain_sources

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_incidents(name: str, torch_version: str | None = "2.3.1") -> list[Incident]:
    """Incidents of one fixture log, read the way the CLI reads it."""
    return explain_sources([str(FIXTURES / name)], torch_version=torch_version,
                           workers=1).incidents


def text_incidents(folder: Path, text: str, name: str = "run.log") -> list[Incident]:
    """Incidents of ``text`` written as a log under ``folder``, read end to end as the CLI
    reads a file (prefilter, joining, classification)."""
    log = folder / name
    log.write_text(text)
    return explain_sources([str(log)], workers=1).incidents


SHAPES = FIXTURES / "shapes"


def shape_incidents(name: str, torch_version: str | None = "2.3.1") -> list[Incident]:
    """Incidents of one log of ``fixtures/shapes`` (logs in the shapes people paste)."""
    return fixture_incidents(f"shapes/{name}", torch_version)


def shape_root(name: str) -> Incident:
    """The root cause explain names for one log of ``fixtures/shapes``; it must name one."""
    found = [i for i in shape_incidents(name) if i.role == "root-cause"]
    assert found, f"{name}: no failure found"
    return found[0]


def kib(x: float) -> int:
    return round(x * 1024)


def mib(x: float) -> int:
    return round(x * 1024**2)


def gib(x: float) -> int:
    return round(x * 1024**3)
