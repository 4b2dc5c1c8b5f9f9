"""What gpu-audit knows about PyTorch, NVIDIA's driver and their messages: catalogues and parsers.

Pure data and pure functions, no I/O. Each fact lives in exactly one module here and every
command that needs it imports it: the out-of-memory message formats (:mod:`.oom`), the Xid
catalogue (:mod:`.xid`), the allocator settings (:mod:`.allocator`) and the CUDA builds of
PyTorch to suggest for a driver (:mod:`.torch_builds`).
"""
