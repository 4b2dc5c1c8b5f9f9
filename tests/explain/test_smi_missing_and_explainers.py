"""nvidia-smi absent where a GPU job expected it (a container started without the NVIDIA
runtime, a pod without the driver's files), and explainers that tell a cause in general or say
what the article addresses. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain.mentions import explainer_cues
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize("name", ["container_no_smi_bash.log", "pod_exec_no_smi.log"])
def test_a_missing_nvidia_smi_is_nvml_unavailable_with_the_runtime_to_check(name: str) -> None:
    smi = root(name)
    assert smi.signature == "nvml-unavailable/smi-missing"
    assert "--gpus all" in smi.remedy and "runtimeClassName" in smi.remedy


def test_the_nvml_library_told_missing_in_a_title() -> None:
    lib = root("pod_libnvml_missing_title.log")
    assert lib.signature == "nvml-unavailable/library-missing"
    assert lib.numbers.get("library") == "libnvidia-ml.so.1"


def test_advice_about_a_missing_nvidia_smi_raises_nothing() -> None:
    assert not [i for i in incidents("smi_missing_advice_only.log") if i.is_failure]


@pytest.mark.parametrize("name", ["explainer_cause_in_general.log",
                                  "explainer_article_addresses.log"])
def test_explainers_quote_failures_as_context(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure]


@pytest.mark.parametrize(("line", "cue"), [
    ("Why ranks diverge", "why"),
    ("The real cause is almost always a skipped collective.", "error-means"),
    ("This article addresses the loader crash.", "this-article"),
    ("Developers frequently encounter the crash on Windows.", "you-have-seen"),
    ("To resolve the worker crash error, keep one process.", "how-to-fix"),
])
def test_explainer_phrases(line: str, cue: str) -> None:
    assert cue in explainer_cues([line])


@pytest.mark.parametrize("line", ["Why does my run stop", "Why is it slow here"])
def test_the_writers_own_why_is_no_heading(line: str) -> None:
    assert "why" not in explainer_cues([line])
