"""Multi-Instance GPU (MIG): turning it off to give jobs the whole GPU again."""

from __future__ import annotations

# Why turning MIG off is not done lightly: nvidia-smi refuses while processes use the GPU, and
# the new mode takes effect only after a GPU reset.
MIG_OFF_NEEDS = "needs a GPU reset and no running jobs"


def mig_off_command(gpu_index: int) -> str:
    """The command that turns MIG mode off on GPU ``gpu_index`` (see :data:`MIG_OFF_NEEDS`)."""
    return f"sudo nvidia-smi -i {gpu_index} -mig 0"
