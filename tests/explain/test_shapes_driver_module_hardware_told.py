"""Shapes read since the twenty-first held-out set: the NVIDIA kernel module that would not
load (modprobe's reasons, RPM Fusion's boot warning), nvidia-smi's and the container CLI's words
retold without their program's name, NVML queries refused in a MIG slice, a driver API function
the driver does not have, a failure a pull request describes (quoted, not reported), and a card
told dead, overheating or meeting an Xid by its owner. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root
from tests.explain.helpers import text_incidents


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("kernel_module_key_rejected.log", "nvml-unavailable", "nvml-unavailable/kernel-module"),
    ("kernel_module_missing_title.log", "nvml-unavailable", "nvml-unavailable/kernel-module"),
    ("smi_retold_could_not_connect.log", "nvml-unavailable",
     "nvml-unavailable/nvidia-smi-no-driver"),
    ("smi_words_title_no_name.log", "nvml-unavailable", "nvml-unavailable/nvidia-smi-no-driver"),
    ("container_cli_title_no_name.log", "nvml-unavailable", "nvml-unavailable/container-cli"),
    ("nvml_query_failed_mig_slice.log", "nvml-unavailable", "nvml-unavailable/query-failed"),
    ("issue_describes_nvml_failure.log", "nvml-unavailable", "nvml-unavailable/pynvml"),
    ("driver_insufficient_lowercase_quote.log", "driver-mismatch",
     "driver-mismatch/insufficient-driver"),
    ("driver_function_not_found.log", "driver-mismatch", "driver-mismatch/driver-older-than-cuda"),
    ("card_toast_title.log", "gpu-hardware", "gpu-hardware/card-dead-told"),
    ("board_burnt_title.log", "gpu-hardware", "gpu-hardware/card-dead-told"),
    ("overheat_told_cause.log", "gpu-hardware", "gpu-hardware/overheat-told"),
    ("xid_met_told.log", "gpu-hardware", "gpu-hardware/xid-mention"),
])
def test_root_cause(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)


@pytest.mark.parametrize("name", [
    "smi_words_condition_guide.log",
    "pr_describes_nvml_failure.log",
    "overheat_general_statement.log",
    "xid_condition_guide.log",
    "card_dead_condition.log",
])
def test_conditions_advice_and_changes_report_no_failure(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure], name


def test_the_module_refused_by_secure_boot_comes_before_nvidia_smi() -> None:
    found = incidents("kernel_module_key_rejected.log")
    assert [i.signature for i in found if i.is_failure][:2] == [
        "nvml-unavailable/kernel-module", "nvml-unavailable/nvidia-smi-no-driver"]
    assert "Secure Boot" in found[0].explanation
    assert found[0].numbers["module"] == "nvidia"


@pytest.mark.parametrize(("line", "words"), [
    ("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service", "Secure Boot"),
    ("modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-45-generic",
     "not rebuilt"),
    ("insmod: ERROR: could not insert module nvidia.ko: Unknown symbol in module",
     "different kernel"),
    ("modprobe: ERROR: could not insert 'nvidia_drm': No such device", "no GPU it supports"),
    ("NVIDIA kernel module missing. Falling back to nouveau", "not rebuilt"),
    ("ERROR: Unable to load the kernel module 'nvidia.ko'.", "could not be loaded"),
    ("[   12.400100] NVRM: No NVIDIA GPU found.", "no GPU it supports"),
])
def test_the_kernel_module_reason_picks_the_advice(tmp_path, line: str, words: str) -> None:
    # (mid-log, with more lines after it than the tail that is always read: the prefilter's
    # keys must find it)
    found = text_incidents(tmp_path, "booting\n" + line + "\n"
                           + "".join(f"service {n} started\n" for n in range(12)), "boot.log")
    assert found and found[0].signature == "nvml-unavailable/kernel-module", line
    assert words in found[0].explanation, found[0].explanation


def test_the_missing_driver_function_is_named() -> None:
    found = root("driver_function_not_found.log")
    assert found.numbers["function"] == "cuMemPoolCreate"
    assert "cuMemPoolCreate" in found.explanation


def test_the_refused_mig_query_says_mig() -> None:
    found = root("nvml_query_failed_mig_slice.log")
    assert found.numbers["query"] == "memory info"
    assert "MIG" in found.explanation and "MIG" in found.remedy


def test_the_xid_the_gpu_met_is_read_by_its_number() -> None:
    assert root("xid_met_told.log").numbers["xid"] == 79


@pytest.mark.parametrize("line", [
    "Update from the lab: the GPU died on Tuesday, halfway through the third epoch.",
    "Heads up, my GPU is toast, so the nightly runs move to the spare node.",
    "The long job burnt my GPU, the fans were clogged.",
])
def test_a_card_told_dead_mid_log(tmp_path, line: str) -> None:
    found = text_incidents(tmp_path, "week 12\n" + line + "\n"
                           + "".join(f"step {n} ok\n" for n in range(12)), "notes.log")
    assert [i.signature for i in found if i.is_failure] == ["gpu-hardware/card-dead-told"], line


def test_a_gpu_the_driver_does_not_support_ranks_before_no_gpu_found(tmp_path) -> None:
    text = ("[   12.400000] NVRM: No NVIDIA GPU found.\n"
            "[   12.400100] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1b80)\n"
            "NVRM: installed in this system is not supported by the\n"
            "NVRM: NVIDIA 580.82.07 driver release.\n"
            + "".join(f"[   13.{n:06d}] usb ok\n" for n in range(10)))
    found = [i for i in text_incidents(tmp_path, text, "dmesg.log") if i.is_failure]
    assert [i.signature for i in found] == ["driver-mismatch/gpu-not-supported-by-driver",
                                            "nvml-unavailable/kernel-module"]


@pytest.mark.parametrize(("line", "function"), [
    ("OSError: /usr/lib/x86_64-linux-gnu/libcuda.so.1: undefined symbol: cuMemAllocAsync",
     "cuMemAllocAsync"),
    ("ImportError: /home/u/.cache/kernels/cuda_utils.so: undefined symbol: "
     "cuTensorMapEncodeTiled", "cuTensorMapEncodeTiled"),
])
def test_a_driver_function_missing_from_the_loader(line: str, function: str) -> None:
    found = classify_text(line, torch_version="2.3.1")
    assert [(i.signature, i.numbers.get("function")) for i in found] == [
        ("driver-mismatch/driver-older-than-cuda", function)]


def test_other_libraries_symbols_are_not_the_driver() -> None:
    found = classify_text("ImportError: libtorch_cuda.so: undefined symbol: "
                          "cublasLtMatmulDescCreate", torch_version="2.3.1")
    assert not [i for i in found if i.signature == "driver-mismatch/driver-older-than-cuda"]
