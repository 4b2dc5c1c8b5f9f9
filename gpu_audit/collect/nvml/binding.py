"""The NVML binding, tolerant: calls by name, newest version first, errors sorted into answers.

A call the driver does not support, or a function the installed library lacks, answers ``None``
without complaint; any other failure becomes a :class:`~gpu_audit.model.ProbeError` on the
subject being read. A versioned function the library lacks is remembered and not asked for
again. Only this package imports ``pynvml``, and only through :func:`import_pynvml`.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gpu_audit.collect.nvml.codes import (
    LIBRARY_NAME,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_SUCCESS,
    VALUE_NOT_AVAILABLE,
)
from gpu_audit.model import NvmlStatus, ProbeError

# "This driver or GPU has no such thing": a None field, not a probe error.
NOT_AVAILABLE = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})
# "This library has no such version of the call": try the older one.
OLDER_VERSION_NEEDED = frozenset(
    {NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_ARGUMENT_VERSION_MISMATCH}
)
# A field id this driver does not know, in a field-values answer: a None field.
UNKNOWN_FIELD = frozenset({*NOT_AVAILABLE, NVML_ERROR_INVALID_ARGUMENT})

_INIT_FAILURES = {
    NVML_ERROR_LIBRARY_NOT_FOUND: (
        "library-not-found",
        f"the NVIDIA driver library ({LIBRARY_NAME}) could not be loaded",
    ),
    NVML_ERROR_DRIVER_NOT_LOADED: (
        "driver-not-loaded",
        "the NVIDIA kernel driver is not loaded (no /dev/nvidia* to talk to)",
    ),
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: (
        "version-mismatch",
        "the NVML library and the loaded kernel driver are from different driver versions",
    ),
    NVML_ERROR_NO_PERMISSION: (
        "no-permission",
        "this user is not allowed to open the NVIDIA device files",
    ),
    NVML_ERROR_INSUFFICIENT_RESOURCES: (
        "insufficient-resources",
        "the driver ran out of resources while initialising NVML",
    ),
}

# One buffer big enough for every process list seen in practice saves the "how many?" call.
_PROCESS_BUFFER_ROWS = 64
# A driver that keeps answering "insufficient size" is asked at most this many times, and never
# with a buffer of more rows than any GPU can run processes (a few MiB at most).
PROCESS_LIST_ATTEMPTS = 4
PROCESS_BUFFER_MAX_ROWS = 65536

# Versioned functions this library lacks; shared by all GPUs so each is tried once per process.
missing_functions: set[str] = set()

# What :meth:`Calls.call_unless_missing` answers for a function this library lacks.
MISSING: Any = object()


class Abandoned(Exception):
    """The reader gave up waiting on this subject: make no further driver calls."""


def import_pynvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


# ------------------------------------------------------------------------------------ errors


def error_code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


@functools.cache
def _error_names(nvml: ModuleType) -> dict[int, str]:
    names = {}
    for name in dir(nvml):
        if name.startswith("NVML_ERROR_"):
            names.setdefault(getattr(nvml, name), name)
    return names


def describe(nvml: ModuleType, exc: BaseException) -> str:
    """'Insufficient Permissions (NVML_ERROR_NO_PERMISSION)' for an NVMLError."""
    code = error_code(exc)
    if code is None:
        return f"{type(exc).__name__}: {exc}"
    try:
        text = str(exc)
    except Exception:  # pynvml asks the library for unknown codes; it may be gone
        text = "error"
    return f"{text} ({_error_names(nvml).get(code, f'NVML error {code}')})"


def loaded_library_path() -> str | None:
    """The file the dynamic loader picked for libnvidia-ml, from this process's memory map."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                if "libnvidia-ml" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        return None
    return None


def _dlopen_error() -> str | None:
    try:
        ctypes.CDLL(LIBRARY_NAME)
    except OSError as exc:
        return str(exc)
    return None


def init_failure(nvml: ModuleType, exc: BaseException) -> NvmlStatus:
    """Why nvmlInit failed, in words a user can act on."""
    code = error_code(exc)
    cause, what = _INIT_FAILURES.get(code, ("unknown", "NVML could not be initialised"))
    message = f"nvmlInit failed: {what}: {describe(nvml, exc)}"
    if code == NVML_ERROR_LIBRARY_NOT_FOUND and (reason := _dlopen_error()):
        message += f"; the loader said: {reason}"
    return NvmlStatus(
        available=False, cause=cause, message=message, library_path=loaded_library_path()
    )


# ------------------------------------------------------------------------------------- calls


class Calls:
    """NVML calls about one subject (``gpu:0``, ``driver``), made by name on a worker thread.

    A failed call answers ``None`` and, unless the driver merely lacks the feature, leaves a
    probe error. The thread waiting on the worker may read :attr:`current_call` and the
    errors at any time, and may :meth:`abandon` the subject: its next call raises
    :class:`Abandoned` instead of reaching the driver.
    """

    def __init__(self, nvml: ModuleType, subject: str) -> None:
        self.nvml = nvml
        self.subject = subject
        self.lock = threading.Lock()
        self.errors: list[ProbeError] = []
        self.current_call: str | None = None
        self._abandoned = False

    def abandon(self) -> None:
        with self.lock:
            self._abandoned = True

    def error(self, message: str, call: str | None) -> None:
        with self.lock:
            self.errors.append(ProbeError("nvml", self.subject, message, call))

    def begin(self, name: str) -> None:
        with self.lock:
            if self._abandoned:
                raise Abandoned
            self.current_call = name

    def end(self) -> None:
        with self.lock:
            self.current_call = None

    def failed(self, name: str, exc: BaseException, what: str = "") -> None:
        """Sort a failed call: unsupported (nothing to say) or a probe error."""
        if error_code(exc) in NOT_AVAILABLE:
            return
        self.error(f"{name} failed{what}: {describe(self.nvml, exc)}", name)

    def call(self, name: str, *args: Any) -> Any:
        """``nvml.<name>(*args)``, or None when it failed (see :meth:`failed`)."""
        self.begin(name)
        try:
            return getattr(self.nvml, name)(*args)
        except self.nvml.NVMLError as exc:
            self.failed(name, exc)
            return None
        finally:
            self.end()

    def call_newest(self, names: tuple[str, ...], fn: Callable[[str], Any]) -> Any:
        """``fn(name)`` for the newest of ``names`` the library has, remembering what it lacks."""
        last = len(names) - 1
        for position, name in enumerate(names):
            if name in missing_functions and position < last:
                continue
            self.begin(name)
            try:
                return fn(name)
            except self.nvml.NVMLError as exc:
                if error_code(exc) in OLDER_VERSION_NEEDED and position < last:
                    missing_functions.add(name)
                    continue
                self.failed(name, exc)
                return None
            finally:
                self.end()
        return None

    def call_unless_missing(self, name: str, *args: Any) -> Any:
        """Like :meth:`call`, but :data:`MISSING` (remembered) when the library lacks ``name``,
        so that the caller can ask the older calls that answer the same."""
        if name in missing_functions:
            return MISSING
        self.begin(name)
        try:
            return getattr(self.nvml, name)(*args)
        except self.nvml.NVMLError as exc:
            if error_code(exc) == NVML_ERROR_FUNCTION_NOT_FOUND:
                missing_functions.add(name)
                return MISSING
            self.failed(name, exc)
            return None
        finally:
            self.end()


# ------------------------------------------------------------------------ raw C entry points


def field_number(value: Any) -> int | float:
    """The number inside one ``nvmlFieldValue_t``, whatever its value type."""
    kind = value.valueType
    union = value.value
    return {
        0: lambda: union.dVal,
        1: lambda: union.uiVal,
        2: lambda: union.ulVal,
        3: lambda: union.ullVal,
        4: lambda: union.sllVal,
        5: lambda: union.siVal,
        6: lambda: union.usVal,
    }.get(kind, lambda: union.ullVal)()


class _ProcessInfoV1(ctypes.Structure):
    """nvmlProcessInfo_v1_t, used by the unversioned process-list entry points."""

    _fields_ = (("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong))


def running_processes(
    nvml: ModuleType, name: str, handle: Any
) -> list[tuple[int, int | None, int | None, int | None]]:
    """(pid, used bytes, MIG GPU instance id, MIG compute instance id) rows from one process-list
    entry point, in one call when they fit; the instance ids are None outside MIG (and from the
    oldest entry point, which lacks them)."""
    row_type = _ProcessInfoV1 if not name.endswith(("_v2", "_v3")) else nvml.c_nvmlProcessInfo_v2_t
    fn = nvml._nvmlGetFunctionPointer(name)
    rows = _PROCESS_BUFFER_ROWS
    for attempt in range(PROCESS_LIST_ATTEMPTS):
        count = ctypes.c_uint(rows)
        buffer = (row_type * rows)()
        ret = fn(handle, ctypes.byref(count), buffer)
        if ret == NVML_SUCCESS:
            break
        if ret != NVML_ERROR_INSUFFICIENT_SIZE or attempt == PROCESS_LIST_ATTEMPTS - 1:
            raise nvml.NVMLError(ret)
        # More processes than rows: grow (bounded) and ask again.
        grown = min(max(count.value * 2 + 8, rows * 2), PROCESS_BUFFER_MAX_ROWS)
        if grown <= rows:
            raise nvml.NVMLError(ret)
        rows = grown
    return [
        (
            row.pid,
            None if row.usedGpuMemory == VALUE_NOT_AVAILABLE else row.usedGpuMemory,
            *_instance_ids(row),
        )
        for row in buffer[: count.value]
    ]


_NO_INSTANCE = 0xFFFFFFFF  # a process-list row's instance id outside MIG


def _instance_ids(row: Any) -> tuple[int | None, int | None]:
    gi = getattr(row, "gpuInstanceId", _NO_INSTANCE)
    ci = getattr(row, "computeInstanceId", _NO_INSTANCE)
    if gi == _NO_INSTANCE:
        return None, None
    return gi, None if ci == _NO_INSTANCE else ci
