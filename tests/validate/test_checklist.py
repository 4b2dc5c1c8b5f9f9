"""Validation stage results as checks: mapping a ``gpu-audit.validate/1`` document."""

from __future__ import annotations

from typing import Any

from gpu_audit.validate.checklist import outcomes_from_document, validation_device


def stage(name: str, status: str, **fields: Any) -> dict[str, Any]:
    base = {"name": name, "quantum": "off", "cycles_planned": 0 if name == "imports" else 3,
            "cycles_done": 0, "status": status, "failure": None, "reason": None,
            "attempts": 1, "duration_s": 4.5, "device": "cuda:0", "summary": None, "gates": [],
            "worker": {"pid": 4321, "exit_code": 0, "signal": None,
                       "log": "runs/r1/logs/default-imports.log", "stderr_tail": None,
                       "explanation": [], "failure_detail": {}}}
    base.update(fields)
    return base


def document(*stages: dict[str, Any], device_name: str | None = "NVIDIA A10G") -> dict:
    return {"schema": "gpu-audit.validate/1",
            "device": {"requested": "cuda", "resolved": "cuda:0", "name": device_name,
                       "fallback_reason": None},
            "torch": {"version": "2.5.1+cu124", "cuda": "12.4"},
            "variants": [{"label": "default", "stages": list(stages)}]}


def test_passed_stages_say_what_ran_where():
    doc = document(stage("imports", "passed"),
                   stage("smoke", "passed", cycles_done=3, duration_s=9.0,
                         summary={"median_cycle_s": 0.25}))
    imports, smoke = outcomes_from_document(doc, ["imports", "smoke"], "runs/r1")
    assert imports.status == "passed" and imports.device == "cuda:0"
    assert imports.summary == ("torch 2.5.1+cu124 imported; cuda:0 (NVIDIA A10G) initialised; "
                               "a tensor round-tripped")
    assert imports.remedy is None and imports.evidence["run_dir"] == "runs/r1"
    assert smoke.summary == "3/3 cycles on cuda:0 (NVIDIA A10G), median 250 ms per cycle"
    assert (smoke.duration_s, smoke.evidence["median_cycle_s"]) == (9.0, 0.25)


def test_a_failed_stage_carries_its_reason_log_tail_and_a_remedy():
    tail = "\n".join(f"line {i}" for i in range(30)) + "\nRuntimeError: CUDA error: no kernel"
    failed = stage("imports", "failed", failure="cuda", device=None,
                   reason="CUDA cannot initialise: CUDA driver version is insufficient",
                   worker={"log": "x.log", "stderr_tail": tail, "explanation": []})
    skipped = stage("smoke", "skipped", reason="not run: stage imports failed", attempts=0)
    imports, smoke = outcomes_from_document(document(failed, skipped), ["imports", "smoke"])
    assert imports.status == "failed"
    assert imports.summary == "cuda: CUDA cannot initialise: CUDA driver version is insufficient"
    assert "nvidia-smi" in imports.remedy
    assert imports.evidence["log_tail"].splitlines()[-1] == "RuntimeError: CUDA error: no kernel"
    assert len(imports.evidence["log_tail"].splitlines()) == 12
    assert "run_dir" not in imports.evidence  # the temporary run folder is gone
    assert (smoke.status, smoke.summary) == ("skipped", "not run: stage imports failed")


def test_the_logs_classification_supplies_the_remedy_and_secrets_are_masked():
    explained = stage("smoke", "failed", failure="oom",
                      reason="cycle 1 ran out of memory; token hf_abcdefghijklmnopqrstuvwxyz123",
                      worker={"log": "x.log", "stderr_tail": None, "explanation": [
                          {"cls": "cuda-oom", "title": "CUDA out of memory",
                           "explanation": "tried to allocate 2 GiB", "remedy": "halve the batch",
                           "numbers": {}}]})
    (smoke,) = outcomes_from_document(document(explained), ["smoke"])
    assert smoke.remedy == "halve the batch"
    assert "hf_abcdefghijklmnopqrstuvwxyz123" not in smoke.summary
    assert "hf_abcdefghijklmnopqrstuvwxyz123" not in str(smoke.evidence)
    assert smoke.evidence["explanation"][0]["title"] == "CUDA out of memory"


def test_gpu_audits_own_breakage_is_an_error_not_a_failure():
    broken = stage("imports", "failed", failure="internal", reason="worker bug")
    (imports,) = outcomes_from_document(document(broken), ["imports"])
    assert imports.status == "error" and "report the traceback" in imports.remedy
    (missing,) = outcomes_from_document(document(), ["smoke"])
    assert missing.status == "error"


def test_stages_run_on_cuda_whenever_the_policy_needs_a_gpu():
    assert validation_device(1, False, None) == "cuda"
    assert validation_device(1, False, "cpu") == "cuda"
    assert validation_device(2, False, "cuda:1") == "cuda:1"
    assert validation_device(0, True, "auto") == "cuda"
    assert validation_device(0, False, None) == "auto"
    assert validation_device(0, False, "cpu") == "cpu"
