"""Out-of-memory errors: recognise every form PyTorch raises, clean up, and retry smaller.

``retry_on_oom`` is public API (``from gpu_audit import retry_on_oom``) and the same code drives
``gpu-audit validate``'s recovery, so what a user tests with ``validate`` is what their run does::

    @retry_on_oom(max_retries=3, shrink=lambda scale: loader.set_batch_size(int(64 * scale)))
    def train_step(batch): ...

On an OOM it drops the failed call's frames (they hold the tensors of the failed step), runs the
garbage collector, synchronises the device and empties PyTorch's cache, halves the batch scale
through ``shrink``, waits with exponential backoff and calls again; after ``max_retries`` it
re-raises the original error with a note of what was tried. Every retry is logged on the
``gpu_audit.oom`` logger and kept in :attr:`OomRetrier.history`.

torch is never imported here: an error is recognised by :mod:`gpu_audit.knowledge.oom` from its
class name and message, and the clean-up touches CUDA only when the program has already
imported torch and initialised CUDA. The memory figures use the same key names as the numbers
of an OOM message.
"""

from __future__ import annotations

import functools
import gc
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpu_audit.knowledge.oom import oom_kind

LOG = logging.getLogger("gpu_audit.oom")

F = TypeVar("F", bound=Callable[..., Any])


def memory_in_use() -> dict[str, int | None]:
    """PyTorch's allocator counters on the current CUDA device, if CUDA is already in use.

    Never imports torch or initialises CUDA: a program that has not touched CUDA has no CUDA
    memory in use.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return {}
    try:
        stats = torch.cuda.memory_stats()
        free, total = torch.cuda.mem_get_info()
    except Exception:  # a broken context must not hide the OOM itself
        return {}
    return {
        "allocated_bytes": stats.get("allocated_bytes.all.current"),
        "reserved_bytes": stats.get("reserved_bytes.all.current"),
        "inactive_split_bytes": stats.get("inactive_split_bytes.all.current"),
        "free_bytes": free,
        "capacity_bytes": total,
    }


def release_memory() -> None:
    """Free what can be freed: Python garbage, then PyTorch's cached blocks on the device.

    ``synchronize`` comes first so that blocks whose frees wait on kernels still running are
    really free before ``empty_cache`` returns them to the driver.
    """
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # the cache can still be emptied
        LOG.debug("synchronize failed during OOM clean-up: %s", exc)
    try:
        torch.cuda.empty_cache()
    except Exception as exc:
        LOG.debug("empty_cache failed during OOM clean-up: %s", exc)


@dataclass(frozen=True)
class OomRetry:
    """One out-of-memory that was caught and retried (or, last, given up on)."""

    attempt: int  # 1 for the first retry
    kind: str
    message: str  # the error's first line
    batch_scale: float  # the scale the retry runs at
    delay_s: float
    memory: dict[str, int | None] = field(default_factory=dict)  # in use when it failed
    gave_up: bool = False


@dataclass(frozen=True)
class OomPolicy:
    max_retries: int = 3
    backoff_s: float = 0.5
    backoff_factor: float = 2.0
    max_backoff_s: float = 30.0
    halve: bool = True  # halve the batch scale on each retry

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        if self.backoff_s < 0 or self.max_backoff_s < 0 or self.backoff_factor < 1:
            raise ValueError("backoff must be >= 0 and backoff_factor >= 1")

    def delay(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * self.backoff_factor ** (attempt - 1))


class OomRetrier:
    """Calls a function, retrying it on out-of-memory errors; keeps the batch scale it reached.

    ``shrink(scale)`` is called before each retry with the new batch scale (0.5, 0.25, ...); it
    may return ``False`` to say the batch cannot get smaller, and the retry then runs at the same
    scale (the clean-up alone can be enough). The scale is kept between calls: a step that only
    fits at half the batch stays at half.
    """

    def __init__(
        self,
        policy: OomPolicy | None = None,
        *,
        shrink: Callable[[float], Any] | None = None,
        on_retry: Callable[[OomRetry], Any] | None = None,
        sleep: Callable[[float], Any] = time.sleep,
        scale: float = 1.0,
        name: str | None = None,
    ) -> None:
        self.policy = policy or OomPolicy()
        self.shrink = shrink
        self.on_retry = on_retry
        self.sleep = sleep
        self.scale = scale
        self.name = name
        self.history: list[OomRetry] = []

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                kind = oom_kind(exc)
                if kind is None:
                    raise
                attempt += 1
                memory = memory_in_use()
                message = _first_line(exc)
                if attempt > self.policy.max_retries:
                    self._give_up(exc, kind, message, memory, attempt)
                    raise
                # Leaving the except block drops the traceback, and with it the frames that
                # still reference the failed step's tensors; only then can they be freed.
            retry = self._prepare_retry(fn, attempt, kind, message, memory)
            self.sleep(retry.delay_s)

    def _prepare_retry(self, fn: Callable[..., Any], attempt: int, kind: str, message: str,
                       memory: dict[str, int | None]) -> OomRetry:
        release_memory()
        if self.policy.halve:
            new_scale = self.scale / 2
            if self.shrink is not None and self.shrink(new_scale) is False:
                new_scale = self.scale  # the batch cannot get smaller; retry at the same size
            self.scale = new_scale
        retry = OomRetry(attempt=attempt, kind=kind, message=message, batch_scale=self.scale,
                         delay_s=self.policy.delay(attempt), memory=memory)
        self.history.append(retry)
        LOG.warning("out of memory (%s) in %s: %s; %sretry %d/%d in %.2g s at batch scale %g",
                    kind, self.name or getattr(fn, "__qualname__", "call"), message,
                    _memory_phrase(memory), attempt, self.policy.max_retries, retry.delay_s,
                    self.scale)
        if self.on_retry is not None:
            self.on_retry(retry)
        return retry

    def _give_up(self, exc: BaseException, kind: str, message: str,
                 memory: dict[str, int | None], attempt: int) -> None:
        retries = attempt - 1
        record = OomRetry(attempt=attempt, kind=kind, message=message, batch_scale=self.scale,
                          delay_s=0.0, memory=memory, gave_up=True)
        self.history.append(record)
        note = (f"gpu-audit: still out of memory after {retries} "
                f"{'retry' if retries == 1 else 'retries'} (batch scale {self.scale:g})")
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        LOG.error("out of memory (%s): %s; %sgiving up after %d %s", kind, message,
                  _memory_phrase(memory), retries, "retry" if retries == 1 else "retries")
        if self.on_retry is not None:
            self.on_retry(record)


def retry_on_oom(
    func: F | None = None,
    *,
    max_retries: int = 3,
    backoff_s: float = 0.5,
    backoff_factor: float = 2.0,
    max_backoff_s: float = 30.0,
    shrink: Callable[[float], Any] | None = None,
    on_retry: Callable[[OomRetry], Any] | None = None,
    halve: bool = True,
) -> Any:
    """Retry ``func`` on out-of-memory errors: clean up, halve the batch, back off, try again.

    Use as ``@retry_on_oom`` or ``@retry_on_oom(max_retries=2, shrink=...)``. The wrapper's
    ``retrier`` attribute holds the :class:`OomRetrier` (its ``scale`` and ``history``).
    """
    policy = OomPolicy(max_retries=max_retries, backoff_s=backoff_s,
                       backoff_factor=backoff_factor, max_backoff_s=max_backoff_s, halve=halve)

    def decorate(fn: F) -> F:
        retrier = OomRetrier(policy, shrink=shrink, on_retry=on_retry,
                             name=getattr(fn, "__qualname__", None))

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return retrier.call(fn, *args, **kwargs)

        wrapper.retrier = retrier  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate(func) if func is not None else decorate


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:500]


def _memory_phrase(memory: dict[str, int | None]) -> str:
    allocated, reserved = memory.get("allocated_bytes"), memory.get("reserved_bytes")
    if allocated is None or reserved is None:
        return ""
    return f"{allocated / 2**30:.2f} GiB allocated, {reserved / 2**30:.2f} GiB reserved; "
