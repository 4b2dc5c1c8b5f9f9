"""gpu-audit: is this GPU machine fit for a long PyTorch run, and why did the last one die?"""

__version__ = "0.1.0"

# Library helpers, imported on first use so that `import gpu_audit` (and `gpu-audit --help`)
# stays light: name -> module that defines it.
_LAZY = {
    "retry_on_oom": "gpu_audit.oom",
    "chunked_map": "gpu_audit.chunked",
}


def __getattr__(name: str) -> object:  # PEP 562: resolved on first access
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpu_audit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
