"""PyTorch's warning that cuDNN turned down one execution plan is context, not a failure: a run
that prints it and goes on is healthy, and a real cuDNN failure after it stays the root cause."""

from __future__ import annotations

from gpu_audit.explain import classify_text
from gpu_audit.model import Severity
from tests.explain.helpers import shape_incidents

WARNING = ("/srv/venv/lib/python3.11/site-packages/torch/nn/modules/conv.py:456: UserWarning: "
           "Plan failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: "
           "cudnnFinalize Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED "
           "(Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)")
HEALTHY = "\n".join([
    "computing activations for 5000 images",
    WARNING,
    "  return F.conv2d(input, weight, bias, self.stride,",
    "100%|##########| 50/50 [00:41<00:00,  1.21it/s]",
    "FID: 14.83",
])


def test_the_plan_warning_alone_is_context():
    incidents = classify_text(HEALTHY, torch_version="2.3.1")
    assert [(i.signature, i.severity) for i in incidents] == [
        ("cudnn-failure/plan-rejected", Severity.INFO)]
    assert incidents[0].role != "root-cause"


def test_a_real_cudnn_failure_after_it_is_still_the_root_cause():
    failing = HEALTHY.replace("FID: 14.83",
                              "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")
    incidents = classify_text(failing, torch_version="2.3.1")
    root = next(i for i in incidents if i.role == "root-cause")
    assert (root.signature, root.severity) == ("cudnn-failure/status", Severity.ERROR)


def test_a_title_that_calls_the_status_a_warning_is_no_failure():
    # "What does the CUDNN_STATUS_NOT_SUPPORTED warning mean?" names the warning above
    incidents = shape_incidents("cudnn_status_called_a_warning.log")
    assert [(i.signature, i.severity) for i in incidents] == [
        ("cudnn-failure/plan-rejected", Severity.INFO)]
