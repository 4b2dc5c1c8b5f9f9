"""Synthetic node documents (``gpu-audit.check/1`` and ``gpu-audit.scan/1``) for fleet tests and
benchmarks: realistic per-GPU spread, deterministic, with issues planted on request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MIB = 1024**2


def gpu(node: int, index: int, **changes: Any) -> dict[str, Any]:
    """One idle H100 with a little node-to-node spread (as real fleets show)."""
    record = {
        "index": index, "uuid": f"GPU-{node:08x}-{index:04x}-4000-8000-000000000000",
        "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 81559 * MIB,
        "utilization_pct": 0, "temperature_c": 30 + (node * 7 + index * 3) % 6,
        "power_draw_w": 68.0 + (node * 5 + index) % 9, "sm_clock_mhz": 345,
        "ecc_errors_corrected_volatile": (node + index) % 3,
        "ecc_errors_uncorrected_volatile": 0, "remapped_rows_correctable": 0,
        "remapped_rows_uncorrectable": 0, "pcie_gen_max": 5, "pcie_width_current": 16,
        "pcie_width_max": 16, "persistence_mode": True, "compute_mode": "default",
        "mig_mode": False,
    }
    record.update(changes)
    return record


def node_document(node: int, *, gpus: int = 8, driver: str = "550.90.07", cuda: str = "12.4",
                  torch: str = "2.13.0+cu124", tool: str = "0.1.0", status: str = "OK",
                  schema: str = "gpu-audit.check/1", hostname: str | None = None,
                  gpu_changes: dict[int, dict[str, Any]] | None = None,
                  generated_at: str = "2026-11-23T10:00:00Z") -> dict[str, Any]:
    """A node's document; ``status`` CRITICAL/WARNING adds a failing/warning check."""
    gpu_changes = gpu_changes or {}
    snapshot = {
        "host": {"hostname": hostname or f"gpu-node-{node:05d}", "boot_time":
                 "2026-11-01T00:00:00Z"},
        "driver": {"driver_version": driver, "nvml_version": f"12.{driver}",
                   "cuda_driver_version": cuda},
        "gpus": [gpu(node, i, **gpu_changes.get(i, {})) for i in range(gpus)],
        "processes": [], "probe_errors": [],
        "allocator": {"torch_version": torch, "pytorch_cuda_alloc_conf": None,
                      "pytorch_alloc_conf": None},
    }
    checks = [{"id": "gpu-count", "subject": "host", "status": "pass", "title": "GPUs",
               "summary": f"{gpus} GPU(s)"}]
    if status != "OK":
        checks.append({"id": "gpu-health", "subject": "gpu:0",
                       "status": "fail" if status == "CRITICAL" else "warn",
                       "title": "GPU health", "summary": "GPU 0 has uncorrectable ECC errors"})
    code = ("OK", "WARNING", "CRITICAL", "UNKNOWN").index(status)
    if schema.startswith("gpu-audit.scan/"):
        findings = [] if status == "OK" else [{
            "id": "ecc-uncorrectable", "severity": "error" if code == 2 else "warning",
            "subject": "gpu:0", "title": "GPU 0 has uncorrectable ECC errors", "detail": "",
            "evidence": {}, "remedy": ""}]
        return {"schema": schema, "tool_version": tool, "generated_at": generated_at,
                **snapshot, "findings": findings,
                "summary": {"worst_severity": None, "counts": {}, "exit_code": code}}
    return {"schema": schema, "tool_version": tool, "generated_at": generated_at,
            "hostname": snapshot["host"]["hostname"], "status": status, "exit_code": code,
            "checks": checks, "findings": [], "snapshot": snapshot}


def write_documents(folder: Path, documents: list[dict[str, Any]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, document in enumerate(documents):
        path = folder / f"check-{i:05d}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        paths.append(path)
    return paths
