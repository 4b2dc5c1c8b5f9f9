"""Failures told in the writer's own words, no message printed, for the platform's and the
program's classes: an NCCL hang, the host out of RAM, a GPU that vanished, a driver too old, an
illegal memory access, nvidia-smi failing and a device-side assertion, in English and in the
languages such reports are written in; and the same words as a question, a condition, advice or
a rule, which name nothing. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "sig_id"), [
    ("nccl_hang_told_at_init.log", "nccl/hang-told"),
    ("host_oom_killer_told_terminated.log", "host-oom/out-of-ram-told"),
    ("gpu_vanished_told_from_smi.log", "gpu-hardware/vanished-told"),
    ("driver_too_old_told_words.log", "driver-mismatch/driver-too-old-told"),
    ("illegal_access_told_training_hits.log", "illegal-memory-access/told"),
    ("nvml_smi_cannot_talk_told.log", "nvml-unavailable/smi-fails-told"),
    ("device_assert_told_words.log", "device-assert/told"),
])
def test_a_telling_in_the_middle_of_a_thread_is_its_root_cause(name: str, sig_id: str) -> None:
    # (the telling sits above the thread's last lines: the prefilter must find it)
    told = root(name)
    assert (told.cls, told.signature) == (sig_id.split("/")[0], sig_id)


def test_the_same_words_as_advice_name_nothing() -> None:
    assert not [i for i in incidents("told_in_words_advice_page.log") if i.is_failure]


def _root_class(text: str) -> str | None:
    found = [i for i in classify_text(text, torch_version=None) if i.role == "root-cause"]
    return found[0].cls if found else None


@pytest.mark.parametrize(("text", "cls"), [
    # NCCL: the run stuck at, in or during NCCL, NCCL as the subject, an NCCL error
    ("All ranks deadlock in NCCL during the first backward pass.", "nccl"),
    ("NCCL hangs when I run on two nodes with InfiniBand.", "nccl"),
    ("The job fails with an NCCL error as soon as the second node joins.", "nccl"),
    ("多机训练时卡在NCCL初始化，30分钟后超时退出", "nccl"),
    ("マルチノード学習でNCCLの初期化で止まってしまいます。", "nccl"),
    ("멀티 노드 학습에서 NCCL 초기화 단계에서 멈춥니다.", "nccl"),
    ("Обучение на двух узлах зависает на инициализации NCCL.", "nccl"),
    ("Das Training hängt bei der NCCL-Initialisierung.", "nccl"),
    ("Das Training bleibt nach einigen Stunden in NCCL hängen.", "nccl"),
    ("El entrenamiento se cuelga en la inicialización de NCCL.", "nccl"),
    ("O treinamento trava na inicialização do NCCL com dois nós.", "nccl"),
    # the host's memory
    ('The script just prints "Killed" and exits when loading the checkpoint.', "host-oom"),
    ("The job runs out of RAM during tokenization.", "host-oom"),
    ("The kernel killed my python process when it used all of the system memory.", "host-oom"),
    ("Процесс падает из-за нехватки оперативной памяти при загрузке датасета.", "host-oom"),
    ("My script exits with code 137 during evaluation.", "host-oom"),
    ("训练到第二个epoch内存爆了，程序直接退出", "host-oom"),
    ("学習中にメモリ不足でプロセスが強制終了されました。", "host-oom"),
    ("데이터를 불러오는 중에 RAM이 부족해서 프로세스가 죽었습니다.", "host-oom"),
    ("Der Arbeitsspeicher läuft beim Laden des Modells voll.", "host-oom"),
    ("Le processus est tué par le OOM killer pendant le chargement.", "host-oom"),
    ("El proceso se queda sin memoria RAM al cargar el modelo.", "host-oom"),
    ("O processo é morto por falta de memória RAM.", "host-oom"),
    # a GPU that vanished
    ("The card vanishes from nvidia-smi in the middle of training.", "gpu-hardware"),
    ("After the crash, GPU 3 no longer shows up in nvidia-smi.", "gpu-hardware"),
    ("服务器跑训练的时候经常掉卡", "gpu-hardware"),
    ("Через несколько часов видеокарта пропадает из nvidia-smi.", "gpu-hardware"),
    ("One of our A100s went missing from nvidia-smi after the job crashed.", "gpu-hardware"),
    ("A GPU do servidor sumiu do nvidia-smi durante o treino.", "gpu-hardware"),
    ("Après quelques heures le GPU disparaît de nvidia-smi.", "gpu-hardware"),
    # the driver too old
    ("It complains that the driver version is insufficient for the CUDA runtime.",
     "driver-mismatch"),
    ("The container needs a newer driver than the 470 we have.", "driver-mismatch"),
    ("驱动版本太低，不支持CUDA 12.1", "driver-mismatch"),
    ("Der NVIDIA-Treiber ist zu alt für CUDA 12.1.", "driver-mismatch"),
    ("The NVIDIA driver on the node was too old for CUDA 12.", "driver-mismatch"),
    ("Diz que o driver da NVIDIA é muito antigo para o CUDA 12.1.", "driver-mismatch"),
    # an illegal memory access
    ("It fails randomly with an illegal memory access after a few hundred steps.",
     "illegal-memory-access"),
    ("训练几百步之后随机出现非法内存访问", "illegal-memory-access"),
    ("数百ステップ後に不正なメモリアクセスが発生して落ちます。", "illegal-memory-access"),
    ("Через несколько сотен шагов обучение падает с illegal memory access.",
     "illegal-memory-access"),
    # nvidia-smi or NVML failing
    ("NVML fails to initialize inside the docker container.", "nvml-unavailable"),
    ('nvidia-smi fails with "Failed to initialize NVML" after the upgrade.',
     "nvml-unavailable"),
    ("容器里nvidia-smi用不了，提示找不到命令", "nvml-unavailable"),
    ("nvidia-smi funktioniert im Container nicht.", "nvml-unavailable"),
    ("nvidia-smi stopped working after the reboot.", "nvml-unavailable"),
    # a device-side assertion
    ("The embedding lookup fails with an index out of bounds assertion.", "device-assert"),
    ("计算loss的时候触发了device-side assert", "device-assert"),
    ("При вычислении loss падает с device-side assert.", "device-assert"),
])
def test_a_failure_told_in_words_is_read(text: str, cls: str) -> None:
    assert _root_class(text) == cls


@pytest.mark.parametrize("text", [
    "Will training hang at NCCL init if the nodes cannot reach each other?",
    "To avoid NCCL timeouts set TORCH_NCCL_BLOCKING_WAIT=1 and raise the timeout.",
    "NCCL hangs are usually caused by a rank that crashed first.",
    "如何解决多机训练卡在NCCL初始化的问题？",
    "Wenn das Training bei der NCCL-Initialisierung hängt, prüfen Sie die Schnittstelle.",
    "Will the process get killed if I load the 70B checkpoint with 32GB of RAM?",
    "The Linux OOM killer terminates the process with the highest score when memory runs out.",
    "Si el proceso se queda sin memoria RAM, el sistema lo mata.",
    "もしメモリ不足でプロセスが強制終了される場合は、ワーカー数を減らしてください。",
    "What should I do if the GPU disappears from nvidia-smi during training?",
    "A GPU that falls off the bus disappears from nvidia-smi until the node is reset.",
    "显卡掉了怎么办？",
    "The python process disappears from nvidia-smi after the job finishes.",
    "GPU memory usage disappears after the process exits.",
    "Rendering on the GPU stops after some samples.",
    "GPUが認識されない場合はドライバーを再インストールしてください。",
    "多机训练 NCCL 超时",
    "Error: no kernel image is available or the driver is too old, check both",
    "Is my driver too old for CUDA 12.1? I have 535 installed.",
    "Make sure your NVIDIA driver is not too old before installing the CUDA 12 build.",
    "驱动版本太低怎么办？",
    "Could an illegal memory access be caused by a wrong index in my kernel?",
    "An illegal memory access means a kernel read or wrote an address it does not own.",
    "如果出现非法内存访问，可以设置CUDA_LAUNCH_BLOCKING=1定位出错的kernel。",
    "Why does nvidia-smi not work inside the container when I forget --gpus all?",
    "nvidia-smi can't talk to the driver when the kernel module is not loaded.",
    "如果容器里nvidia-smi用不了，请检查是否加了--gpus all。",
    "What does a device-side assert mean in CrossEntropyLoss?",
    "A device-side assert is usually a label outside the range of the classes.",
    "如果触发了device-side assert，通常是标签越界。",
])
def test_a_question_a_condition_advice_or_a_rule_names_nothing(text: str) -> None:
    assert _root_class(text) is None


def test_the_gpus_memory_told_running_out_is_no_host_kill() -> None:
    assert _root_class("The GPU memory runs out and the script crashes at step 100.") == (
        "cuda-oom")


def test_a_hang_told_in_words_leaves_the_titles_failure_the_root() -> None:
    # the hang is an echo: the ECC error the title names is what it echoes
    found = incidents("title_ecc_body_nccl_hang_told.log")
    assert [(i.cls, i.role) for i in found if i.is_failure][:2] == [
        ("gpu-hardware", "root-cause"), ("nccl", "related")]
