"""The environment variables that carry allocator settings to PyTorch (names only, no parser).

Kept apart so the collectors and the in-process monitor can name them without loading the
grammar; which of them a given torch reads is :mod:`gpu_audit.knowledge.allocator.variables`.
"""

CUDA_VAR = "PYTORCH_CUDA_ALLOC_CONF"
NEW_VAR = "PYTORCH_ALLOC_CONF"
BOTH_VARS = (CUDA_VAR, NEW_VAR)  # gpu-audit reads both and sets both to the same string
HIP_VAR = "PYTORCH_HIP_ALLOC_CONF"  # ROCm builds' name for CUDA_VAR (deprecated alike)
# Set to any value (0 included), it makes every allocation call cudaMalloc: no cache, and none
# of the settings above apply (torch checks only that the variable exists).
NO_CACHING_VAR = "PYTORCH_NO_CUDA_MEMORY_CACHING"
