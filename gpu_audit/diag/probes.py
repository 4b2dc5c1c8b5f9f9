"""The active tests of ``gpu-audit diag``, with torch, in the diag worker.

Each function takes the imported ``torch`` and a device (a GPU, or the CPU in the test mode) and
returns a plain record: what it measured, in the units the document uses (bytes, seconds, GB/s as
10^9 bytes per second, TFLOPS as 10^12 operations per second). A test that does not apply
(no fp8 on this GPU, no host link on the CPU) answers ``{"skipped": reason}``; a wrong answer is
``{"ok": False, ...}``; nothing here judges against an expectation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

GB = 1e9


def sig(value: float, digits: int = 5) -> float:
    """``value`` to ``digits`` significant digits (a CPU's TFLOPS are small numbers)."""
    return float(f"{value:.{digits}g}")


def sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(torch: Any, device: Any, step: Callable[[], Any], seconds: float,
           min_iterations: int = 3) -> tuple[int, float]:
    """Run ``step`` (once to warm up) until ``seconds`` have passed; (iterations, elapsed)."""
    step()
    sync(torch, device)
    count, started = 0, time.perf_counter()
    while True:
        step()
        count += 1
        if count >= min_iterations and count % 2 == 0:
            sync(torch, device)
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return count, elapsed


def context(torch: Any, device: Any) -> dict[str, Any]:
    """CUDA context creation (the first allocation on the device) and what the device is."""
    started = time.perf_counter()
    probe = torch.zeros(1, device=device)
    sync(torch, device)
    seconds = time.perf_counter() - started
    record: dict[str, Any] = {"ok": True, "seconds": round(seconds, 4)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        free, total = torch.cuda.mem_get_info(device)
        record.update(name=props.name, compute_capability=f"{props.major}.{props.minor}",
                      multiprocessors=props.multi_processor_count,
                      memory_total_bytes=total, memory_free_bytes=free)
    del probe
    return record


LAUNCH_REPEATS = 5


def kernel_launch(torch: Any, device: Any) -> dict[str, Any]:
    """A small kernel launched and answered right, and the launch-to-answer latency.

    The first launch also loads the kernels' code (CUDA loads modules lazily: tens of
    milliseconds on an H200), so it is reported apart; ``latency_us`` is the median of the
    launches after it."""
    values = torch.arange(1024, dtype=torch.float32, device=device)
    sync(torch, device)
    expected = 2 * (1023 * 1024 / 2) + 1024
    totals, times = [], []
    for _ in range(1 + LAUNCH_REPEATS):
        started = time.perf_counter()
        totals.append(float((values * 2 + 1).sum().item()))
        times.append(time.perf_counter() - started)
    return {"ok": all(total == expected for total in totals),
            "latency_us": round(statistics.median(times[1:]) * 1e6, 1),
            "first_launch_us": round(times[0] * 1e6, 1), "result": totals[0],
            "expected": expected}


def round_trip(torch: Any, device: Any, size_bytes: int) -> dict[str, Any]:
    """``size_bytes`` of a counting pattern from the host to the device and back, compared."""
    words = max(1, size_bytes // 4)
    host = torch.arange(words, dtype=torch.int32)
    started = time.perf_counter()
    on_device = host.to(device)
    twice = on_device * 2  # computed on the device, so the pattern must be right there too
    back = twice.cpu()
    seconds = time.perf_counter() - started
    wrong = back != host * 2
    bad = int(wrong.sum().item())
    record: dict[str, Any] = {"ok": bad == 0, "bytes": words * 4, "seconds": round(seconds, 4),
                              "bad_words": bad}
    if bad:
        first = int(torch.nonzero(wrong)[0].item())
        record["first_bad_offset_bytes"] = first * 4
    del on_device, twice, back
    return record


def matmul_check(torch: Any, device: Any, n: int = 512) -> dict[str, Any]:
    """A short fp32 matmul compared with the same product in float64 on the CPU."""
    generator = torch.Generator().manual_seed(7)
    a = torch.randn(n, n, generator=generator)
    b = torch.randn(n, n, generator=generator)
    reference = a.double() @ b.double()
    previous = _tf32(torch, False)
    try:
        got = (a.to(device) @ b.to(device)).cpu().double()
    finally:
        _tf32(torch, previous)
    error = float((got - reference).abs().max().item())
    bound = 1e-3 * n ** 0.5
    return {"ok": error <= bound, "n": n, "max_abs_error": error, "bound": bound}


def _tf32(torch: Any, allow: bool) -> bool:
    previous = bool(torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = allow
    return previous


def memory_bandwidth(torch: Any, device: Any, size_bytes: int, seconds: float) -> dict[str, Any]:
    """Device memory bandwidth: a buffer copied into another; reads plus writes per second."""
    words = max(1, size_bytes // 4)
    src = torch.ones(words, dtype=torch.int32, device=device)
    dst = torch.empty_like(src)
    count, elapsed = _timed(torch, device, lambda: dst.copy_(src), seconds)
    moved = 2 * words * 4 * count
    return {"gbs": sig(moved / elapsed / GB), "bytes": words * 4, "iterations": count,
            "seconds": round(elapsed, 3)}


def host_bandwidth(torch: Any, device: Any, size_bytes: int, seconds: float) -> dict[str, Any]:
    """Pinned host-to-device and device-to-host copy bandwidth, one direction at a time."""
    if device.type != "cuda":
        return {"skipped": "the CPU device has no host link"}
    words = max(1, size_bytes // 4)
    host = torch.ones(words, dtype=torch.int32).pin_memory()
    dev = torch.empty(words, dtype=torch.int32, device=device)
    h2d_count, h2d_s = _timed(torch, device, lambda: dev.copy_(host, non_blocking=True),
                              seconds)
    d2h_count, d2h_s = _timed(torch, device, lambda: host.copy_(dev, non_blocking=True),
                              seconds)
    return {"h2d_gbs": round(words * 4 * h2d_count / h2d_s / GB, 2),
            "d2h_gbs": round(words * 4 * d2h_count / d2h_s / GB, 2), "bytes": words * 4,
            "pinned": True}


def _fp8_supported(torch: Any, device: Any) -> str | None:
    if device.type != "cuda":
        return "fp8 matmul needs a GPU"
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no fp8 matmul"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        return f"compute capability {major}.{minor} has no fp8 tensor cores (8.9 or newer)"
    return None


def matmul_throughput(torch: Any, device: Any, dtype: str, n: int,
                      seconds: float) -> dict[str, Any]:
    """Square matmuls of size ``n`` in ``dtype`` for ``seconds``: TFLOPS (2 n^3 per product)."""
    if device.type == "cpu" and dtype in ("tf32", "fp8", "fp16"):
        return {"skipped": f"{dtype} matmul is a GPU path"}
    if dtype == "fp8":
        reason = _fp8_supported(torch, device)
        if reason:
            return {"skipped": reason}
    generator = torch.Generator(device=device).manual_seed(11)
    a = torch.randn(n, n, device=device, generator=generator)
    b = torch.randn(n, n, device=device, generator=generator)
    previous = _tf32(torch, dtype == "tf32")
    try:
        if dtype == "fp8":
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as cuBLASLt wants
            one = torch.tensor(1.0, device=device)

            def step() -> Any:
                return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16)
        else:
            kind = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                    "bf16": torch.bfloat16}[dtype]
            a, b = a.to(kind), b.to(kind)

            def step() -> Any:
                return a @ b
        count, elapsed = _timed(torch, device, step, seconds)
    except (RuntimeError, TypeError) as exc:
        return {"skipped": f"{dtype} matmul failed: {str(exc).splitlines()[0][:200]}"}
    finally:
        _tf32(torch, previous)
    return {"tflops": sig(2 * n ** 3 * count / elapsed / 1e12), "n": n,
            "iterations": count, "seconds": round(elapsed, 3)}


def sustained(torch: Any, device: Any, dtype: str, n: int, duration: float,
              emit: Callable[[dict[str, Any]], None], tick: float = 1.0) -> dict[str, Any]:
    """Matmuls for ``duration`` seconds; one event per ``tick`` with that second's TFLOPS."""
    kind = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
            "bf16": torch.bfloat16}.get(dtype, torch.float32)
    previous = _tf32(torch, dtype == "tf32")
    a = torch.randn(n, n, device=device).to(kind)
    b = torch.randn(n, n, device=device).to(kind)
    ticks: list[float] = []
    try:
        a @ b
        sync(torch, device)
        started = time.perf_counter()
        window_start, window_count = started, 0
        while True:
            a @ b
            window_count += 1
            sync(torch, device)
            now = time.perf_counter()
            if now - window_start >= tick:
                tflops = 2 * n ** 3 * window_count / (now - window_start) / 1e12
                ticks.append(sig(tflops))
                emit({"ev": "tick", "t_s": round(now - started, 2), "tflops": ticks[-1]})
                window_start, window_count = now, 0
            if now - started >= duration:
                break
    finally:
        _tf32(torch, previous)
    return {"dtype": dtype, "n": n, "duration_s": round(time.perf_counter() - started, 2),
            "tflops": ticks}


def peer_matrix(torch: Any, count: int) -> list[list[bool | None]]:
    """``can_device_access_peer`` for every ordered pair (``None`` on the diagonal)."""
    return [[None if i == j else bool(torch.cuda.can_device_access_peer(i, j))
             for j in range(count)] for i in range(count)]


def peer_copy(torch: Any, source: int, target: int, size_bytes: int,
              seconds: float) -> dict[str, Any]:
    """Copy bandwidth from one GPU to another (through NVLink, PCIe P2P or the host)."""
    words = max(1, size_bytes // 4)
    src = torch.ones(words, dtype=torch.int32, device=f"cuda:{source}")
    dst = torch.empty(words, dtype=torch.int32, device=f"cuda:{target}")

    def step() -> Any:
        return dst.copy_(src, non_blocking=True)

    step()
    torch.cuda.synchronize(source)
    torch.cuda.synchronize(target)
    count, started = 0, time.perf_counter()
    while True:
        step()
        count += 1
        if count % 4 == 0:
            torch.cuda.synchronize(source)
            torch.cuda.synchronize(target)
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                break
    ok = bool((dst[:1024] == 1).all().item())
    return {"gbs": round(words * 4 * count / elapsed / GB, 2), "bytes": words * 4, "ok": ok}


def all_reduce(torch: Any, count: int, size_bytes: int, seconds: float) -> dict[str, Any]:
    """NCCL all-reduce across ``count`` GPUs from one process: NCCL's bus bandwidth
    (algorithm bandwidth x 2(n-1)/n), and whether the sum came out right."""
    try:
        from torch.cuda import nccl
    except ImportError as exc:
        return {"skipped": f"torch has no NCCL: {exc}"}
    if not nccl.is_available([torch.zeros(1, device=f"cuda:{i}") for i in range(count)]):
        return {"skipped": "NCCL is not available for these tensors"}
    words = max(1, size_bytes // 4)
    tensors = [torch.ones(words, dtype=torch.float32, device=f"cuda:{i}") for i in range(count)]
    nccl.all_reduce(tensors)
    for i in range(count):
        torch.cuda.synchronize(i)
    ok = bool((tensors[0][:1024] == count).all().item())
    iterations, started = 0, time.perf_counter()
    while True:
        nccl.all_reduce(tensors)
        iterations += 1
        if iterations % 4 == 0:
            for i in range(count):
                torch.cuda.synchronize(i)
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                break
    algorithm = words * 4 * iterations / elapsed / GB
    del tensors
    return {"bus_gbs": round(algorithm * 2 * (count - 1) / count, 2),
            "algorithm_gbs": round(algorithm, 2), "bytes": words * 4, "gpus": count, "ok": ok}
