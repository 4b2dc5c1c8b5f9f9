"""Remedy texts that several failure classes give, and sizes as PyTorch writes them."""

from __future__ import annotations

from gpu_audit.units import fmt_bytes

REDUCE_MEMORY = (
    "Reduce what one step keeps on the GPU:\n"
    "- lower the batch size (keep the effective batch with gradient accumulation) or the "
    "sequence length;\n"
    "- enable activation checkpointing (torch.utils.checkpoint; "
    "model.gradient_checkpointing_enable() in transformers);\n"
    "- compute in bf16/fp16 with torch.autocast(\"cuda\", dtype=torch.bfloat16);\n"
    "- or shard the model and optimizer state across GPUs (FSDP, DeepSpeed ZeRO)."
)
SCAN_OTHERS = (
    "Run `gpu-audit scan` to see every process holding GPU memory; stop the ones that should "
    "not be there, or give this job a free GPU with CUDA_VISIBLE_DEVICES."
)
FIND_FAULTING_KERNEL = (
    "Rerun with CUDA_LAUNCH_BLOCKING=1 so the failing kernel raises at its own call site;\n"
    "run a small reproduction under `compute-sanitizer --tool memcheck python train.py`;\n"
    "switch off custom or compiled kernels (torch.compile, Triton, fused/flash attention) one "
    "at a time;\n"
    "check `sudo dmesg -T | grep -i xid`: Xid 48/79/94/95 mean the GPU, not the code."
)
KERNEL_FAULT = (
    "The process's CUDA context is now unusable: every later CUDA call fails with the same "
    "error, and the other ranks' collectives time out waiting for this one. Kernels run "
    "asynchronously, so the Python stack trace usually points at a later call, not the kernel "
    "that faulted."
)
REBOOT_MISMATCH = (
    "Reboot the node (or stop every GPU process and reload the modules: `sudo rmmod "
    "nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`); keep unattended "
    "upgrades off the driver (`sudo apt-mark hold 'nvidia-*' 'libnvidia-*'`)."
)


def size_text(n: int | None) -> str:
    """A size written as PyTorch writes it (``2.00 GiB``), so numbers quoted from a log read
    the same; ``unknown`` when it is missing."""
    return fmt_bytes(n, precision=2, missing="unknown")
