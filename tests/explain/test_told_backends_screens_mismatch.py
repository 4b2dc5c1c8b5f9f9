"""Failures told in words in the shapes the first tellings' patterns left out: NCCL named as the
run's backend after the stall ("hangs at the first all_reduce ... with NCCL"), the driver's
version between it and "too old", a build told to have dropped the writer's card, NVML's
driver/library mismatch told without its message, the error named as a device-side assert, the
screens going black with the fans at full speed, a card told falling off the bus; mid-thread
(the prefilter must find them) and in other word orders and languages. The same words as a
question, a condition, advice, a release note or a rule name nothing. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "sig_id"), [
    ("nccl_hang_told_backend_after_stall.log", "nccl/hang-told"),
    ("driver_too_old_told_version_between.log", "driver-mismatch/driver-too-old-told"),
    ("card_dropped_by_build_told.log", "driver-mismatch/wrong-arch-told"),
    ("nvml_mismatch_told_by_smi.log", "nvml-unavailable/smi-fails-told"),
    ("device_assert_told_as_the_error.log", "device-assert/told"),
    ("screens_black_fans_full_told.log", "gpu-hardware/power-loss-told"),
    ("card_falling_off_bus_told.log", "gpu-hardware/lost-told"),
])
def test_a_telling_in_the_middle_of_a_thread_is_its_root_cause(name: str, sig_id: str) -> None:
    # (the telling sits above the thread's last lines: the prefilter must find it)
    told = root(name)
    assert (told.cls, told.signature) == (sig_id.split("/")[0], sig_id)


def test_the_same_words_as_advice_a_rule_or_a_question_name_nothing() -> None:
    assert not [i for i in incidents("tells_in_words_advice_page_backends_screens.log")
                if i.is_failure]


def _root_class(text: str) -> str | None:
    found = [i for i in classify_text(text, torch_version=None) if i.role == "root-cause"]
    return found[0].cls if found else None


@pytest.mark.parametrize(("text", "cls"), [
    # NCCL as the run's backend, after the stall or before it
    ("All 16 ranks get stuck at the first dist.barrier() with NCCL; one node is fine.", "nccl"),
    ("The job freezes at init_process_group with the nccl backend on two machines.", "nccl"),
    ("It freezes at init_process_group(backend='nccl') on the second machine.", "nccl"),
    ("Evaluation deadlocks in all_gather with the nccl backend after the first epoch.", "nccl"),
    ("Using the NCCL backend across two hosts, the job hangs at init_process_group.", "nccl"),
    ("Rank 5 times out in the NCCL all_reduce after ten minutes.", "nccl"),
    ("Training hung at the first barrier with NCCL; fixed now with NCCL_SOCKET_IFNAME.", "nccl"),
    ("两台机器用NCCL训练，一直卡在第一次all_reduce，单机没问题。", "nccl"),
    ("NCCLバックエンドで2ノード学習すると、最初のall_reduceで止まってしまいます。", "nccl"),
    ("Con NCCL en dos nodos el entrenamiento se queda colgado en el primer all_reduce.", "nccl"),
    ("При обучении на двух узлах с NCCL всё зависает на первом all_reduce.", "nccl"),
    # the driver's version between it and "too old"
    ("My driver is 470 which is too old for the CUDA 12.1 build of PyTorch.",
     "driver-mismatch"),
    ("The host driver 450.80 was too old for the cu121 image.", "driver-mismatch"),
    ("Turns out the 470 driver on my laptop is too old for CUDA 12.", "driver-mismatch"),
    ("Mein Treiber 470 ist zu alt für CUDA 12.1.", "driver-mismatch"),
    ("我的驱动是470，版本太低，不支持CUDA 12.1。", "driver-mismatch"),
    ("ドライバーが470で古すぎて、CUDA 12.1が使えませんでした。", "driver-mismatch"),
    ("Mon pilote 470 est trop ancien pour CUDA 12.1.", "driver-mismatch"),
    # a build told to have dropped the writer's card
    ("The new PyTorch wheels dropped support for my card's compute capability 3.0.",
     "driver-mismatch"),
    ("The current PyTorch release no longer supports our K80s.", "driver-mismatch"),
    ("My GTX 780 (sm_35) is no longer supported by the prebuilt binaries.", "driver-mismatch"),
    # NVML's mismatch told without its message
    ("After apt upgraded the driver, nvidia-smi reports a driver/library version mismatch.",
     "nvml-unavailable"),
    ("We got the driver/library version mismatch on node 7 after the upgrade.",
     "nvml-unavailable"),
    ("驱动自动更新以后，nvidia-smi报Driver/library version mismatch", "nvml-unavailable"),
    ("nvidia-smiを実行するとDriver/library version mismatchと出ます。", "nvml-unavailable"),
    ("Since the upgrade nvidia-smi complains that it can't communicate with the NVIDIA driver.",
     "nvml-unavailable"),
    # the error named as a device-side assert
    ("It was a device-side assert: my labels went up to 10 with 10 classes.", "device-assert"),
    ("The crash turned out to be a device-side assertion from a padding index.",
     "device-assert"),
    ("We ran into a device-side assert because the masks had the value 255.", "device-assert"),
    ("Es war ein device-side assert, weil die Labels bis 10 gingen.", "device-assert"),
    ("原来是device-side assert，标签超出了类别数。", "device-assert"),
    # the screens black and the fans at full speed, a machine that restarts, a card off the bus
    ("After a few minutes of training the monitors go black and the GPU fans go to 100%.",
     "gpu-hardware"),
    ("The GPU fans ramp to 100% and both displays go blank five minutes into rendering.",
     "gpu-hardware"),
    ("Every time training runs about 10 minutes, the whole PC shuts off.", "gpu-hardware"),
    ("GPU 3 fell off the bus again during the nightly run.", "gpu-hardware"),
    ("My 3090 in the eGPU enclosure keeps dropping off the PCIe bus under load.",
     "gpu-hardware"),
])
def test_a_failure_told_in_words_is_read(text: str, cls: str) -> None:
    assert _root_class(text) == cls


@pytest.mark.parametrize("text", [
    "If training hangs at the first all_reduce with NCCL, set NCCL_DEBUG=INFO.",
    "- Fixed a hang at init_process_group with the NCCL backend when MASTER_ADDR is a name.",
    "Why would a job hang at barrier with NCCL but not with gloo?",
    "Training with the NCCL backend on 8 nodes runs fine, all_reduce takes 12 ms per step.",
    "With gloo the run is slow, and with NCCL it never hangs at barrier anymore.",
    "Is the 470 driver too old for CUDA 12.1, or will it still work?",
    "If your driver is 470 or older, which is too old for CUDA 12, install the cu118 wheels.",
    "My driver is 550.54, which is new enough for CUDA 12.4.",
    "- Dropped support for compute capability 3.5 and 3.7 in the CUDA 11.8 binaries.",
    "Has PyTorch dropped support for my K40 yet, or can I still use the 2.1 wheels?",
    "How do you avoid the driver/library version mismatch when apt upgrades the driver?",
    "Could this be a device-side assert from the labels, or is it the sampler?",
    "When it crashes on a device-side assert, set CUDA_LAUNCH_BLOCKING=1 to find the op.",
    "The screen goes black after 10 minutes of idle, training keeps running fine.",
    "The fans go to 100% when training starts, it is loud but everything works.",
    "What makes a card fall off the bus, is it always the riser?",
    "The scheduler restarts the worker every hour to pick up the new config.",
    "NCCLバックエンドで最初のall_reduceで止まる場合は、NCCL_DEBUG=INFOを設定してください。",
    "Si con NCCL el entrenamiento se queda colgado, revise la interfaz de red.",
    "如果驱动是470，版本太低，请先升级驱动。",
    "もしDriver/library version mismatchと出たら、再起動してください。",
])
def test_a_question_a_condition_advice_or_a_rule_names_nothing(text: str) -> None:
    assert _root_class(text) is None
