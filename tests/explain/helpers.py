"""Shared helpers for the explain tests: fixture logs and exact byte counts."""

from __future__ import annotations

from pathlib import Path

from gpu_audit.explain import Incident, explain_sources

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_incidents(name: str, torch_version: str | None = "2.3.1") -> list[Incident]:
    """Incidents of one fixture log, read the way the CLI reads it."""
    return explain_sources([str(FIXTURES / name)], torch_version=torch_version,
                           workers=1).incidents


def kib(x: float) -> int:
    return round(x * 1024)


def mib(x: float) -> int:
    return round(x * 1024**2)


def gib(x: float) -> int:
    return round(x * 1024**3)
