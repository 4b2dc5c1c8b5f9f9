"""Synthetic PyTorch memory snapshots built to the documented format (reference §5).

``_snapshot()`` returns ``segments`` (sorted by address; each with ``device``, ``address``,
``total_size``, ``allocated_size``, ``active_size``, ``requested_size``, ``stream``,
``segment_type``, ``segment_pool_id``, ``is_expandable``, ``frames`` and ``blocks``), per-block
``address``/``size``/``requested_size``/``state``/``frames``, ``device_traces`` (one list per
device; entries with ``action``, ``addr`` (``device_free`` for ``oom``), ``size``, ``stream``,
``time_us``, ``frames``) and ``allocator_settings``. Frames are innermost first.
"""

from __future__ import annotations

import copy
from typing import Any

MIB = 1024**2
GIB = 1024**3

CUDA_MALLOC = {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}
CEVAL = {"filename": "Python/ceval.c", "line": 0, "name": "_PyEval_EvalFrameDefault"}
TRAIN = "/home/alice/finetune/scripts/train.py"
LINEAR = "/home/alice/.venv/lib/python3.11/site-packages/torch/nn/modules/linear.py"
ADAM = "/home/alice/.venv/lib/python3.11/site-packages/torch/optim/adam.py"
EVAL = "/home/alice/finetune/scripts/evaluate.py"


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


ACTIVATIONS_STACK = [CUDA_MALLOC, CEVAL, frame(LINEAR, 125, "forward"),
                     frame(TRAIN, 88, "training_step"), frame(TRAIN, 140, "main")]
OPTIMIZER_STACK = [CUDA_MALLOC, frame(ADAM, 410, "_multi_tensor_adam"),
                   frame(TRAIN, 95, "optimizer_step"), frame(TRAIN, 141, "main")]
EVAL_STACK = [frame(EVAL, 12, "evaluate"), frame(TRAIN, 150, "main")]

# Device 0 addresses
SEG_A, SEG_B, SEG_C, SEG_D = 0x7F0000000000, 0x7F0040000000, 0x7F0041400000, 0x7F0042000000
ACTIVATIONS_REQUEST = 256 * MIB - 100
SMALL_FREE = 2 * MIB - 512 - 1 * MIB


def block(address: int, size: int, state: str, requested: int | None = None,
          frames: list | None = None) -> dict[str, Any]:
    return {"address": address, "size": size, "requested_size": size if requested is None
            else requested, "state": state, "frames": frames or []}


def segment(device: int, address: int, blocks: list[dict], *, kind: str = "large",
            pool: tuple[int, int] = (0, 0), expandable: bool = False,
            stream: int = 0) -> dict[str, Any]:
    live = [b for b in blocks if b["state"] != "inactive"]
    return {
        "device": device, "address": address, "total_size": sum(b["size"] for b in blocks),
        "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
        "active_size": sum(b["size"] for b in live),
        "requested_size": sum(b["requested_size"] for b in live),
        "stream": stream, "segment_type": kind, "segment_pool_id": pool,
        "is_expandable": expandable, "frames": [], "blocks": blocks,
    }


def event(action: str, addr: int, size: int, t_ms: int, frames: list | None = None,
          **extra: Any) -> dict[str, Any]:
    entry = {"action": action, "addr": addr, "size": size, "stream": 0,
             "time_us": 1_795_000_000_000_000 + t_ms * 1000, "frames": frames or []}
    entry.update(extra)
    return entry


def finetune_oom_after_eval() -> dict[str, Any]:
    """A fine-tuning job that ran out of memory: 384 MiB trapped in a split 1 GiB segment.

    Device 0 holds: a 1 GiB segment split into activations (256 MiB), a 128 MiB hole, optimizer
    state (384 MiB) and a 256 MiB hole; a whole free 20 MiB segment; a small 2 MiB segment with
    a 512 B evaluation tensor, 1 MiB freed but awaiting a stream, and the rest free; a 40 MiB
    private (CUDA graph) pool. Device 1 uses expandable segments: 40 MiB used of 60 MiB mapped.
    The history on device 0 starts from an empty allocator and ends in an OOM.
    """
    seg_a = segment(0, SEG_A, [
        block(SEG_A, 256 * MIB, "active_allocated", ACTIVATIONS_REQUEST, ACTIVATIONS_STACK),
        block(SEG_A + 256 * MIB, 128 * MIB, "inactive"),
        block(SEG_A + 384 * MIB, 384 * MIB, "active_allocated", frames=OPTIMIZER_STACK),
        block(SEG_A + 768 * MIB, 256 * MIB, "inactive"),
    ])
    seg_b = segment(0, SEG_B, [block(SEG_B, 20 * MIB, "inactive")])
    seg_c = segment(0, SEG_C, [
        block(SEG_C, 512, "active_allocated", 100, EVAL_STACK),
        block(SEG_C + 512, 1 * MIB, "active_pending_free", 1 * MIB),
        block(SEG_C + 512 + MIB, SMALL_FREE, "inactive"),
    ], kind="small")
    seg_d = segment(0, SEG_D, [block(SEG_D, 40 * MIB, "active_allocated")], pool=(1, 2))
    dev1 = 0x7E0000000000
    seg_e = segment(1, dev1, [
        block(dev1, 40 * MIB, "active_allocated", frames=ACTIVATIONS_STACK),
        block(dev1 + 40 * MIB, 20 * MIB, "inactive"),
    ], expandable=True)
    trace0 = [
        event("segment_alloc", SEG_A, GIB, 0),
        event("alloc", SEG_A, ACTIVATIONS_REQUEST, 10, ACTIVATIONS_STACK),
        event("alloc", SEG_A + 256 * MIB, 128 * MIB, 20),
        event("alloc", SEG_A + 384 * MIB, 384 * MIB, 30, OPTIMIZER_STACK),
        event("alloc", SEG_A + 768 * MIB, 256 * MIB, 40),  # peak: 1 GiB - 100 B in use
        event("free_requested", SEG_A + 256 * MIB, 128 * MIB, 50),
        event("free_completed", SEG_A + 256 * MIB, 128 * MIB, 51),
        event("free_requested", SEG_A + 768 * MIB, 256 * MIB, 60),
        event("free_completed", SEG_A + 768 * MIB, 256 * MIB, 61),
        event("segment_alloc", SEG_B, 20 * MIB, 70),
        event("alloc", SEG_B, 15 * MIB, 71),
        event("free_requested", SEG_B, 15 * MIB, 72),
        event("free_completed", SEG_B, 15 * MIB, 73),
        event("segment_alloc", SEG_C, 2 * MIB, 80),
        event("alloc", SEG_C, 100, 81, EVAL_STACK),
        event("alloc", SEG_C + 512, 1 * MIB, 82),
        event("free_requested", SEG_C + 512, 1 * MIB, 83),
        event("segment_alloc", SEG_D, 40 * MIB, 90),
        event("alloc", SEG_D, 40 * MIB, 91),
        event("oom", 0, 2 * GIB, 2000, device_free=300 * MIB),
    ]
    del trace0[-1]["addr"]  # an oom entry carries device_free instead of addr
    return {
        "segments": [seg_a, seg_b, seg_c, seg_d, seg_e],
        "device_traces": [trace0, []],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512",
                               "max_split_size": 512 * MIB, "garbage_collection_threshold": 0.0,
                               "expandable_segments": False,
                               "roundup_power2_divisions": {"1": 0, "2": 0}},
        "external_annotations": [],
    }


def legacy_2_0_snapshot() -> dict[str, Any]:
    """The ≈2.0 layout: no per-block frames/requested_size, a ``history`` list instead."""
    snap = finetune_oom_after_eval()
    snap = copy.deepcopy(snap)
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            frames, requested = b.pop("frames"), b.pop("requested_size")
            b["history"] = [{"addr": b["address"], "real_size": requested, "frames": frames}] \
                if b["state"] != "inactive" else []
    del snap["device_traces"]
    del snap["allocator_settings"]
    return snap
