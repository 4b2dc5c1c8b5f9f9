"""Dataclasses to JSON and back, and atomic file writes.

Loading is strict about types and names the offending field, so a hand-edited or truncated
``--from`` file gives a message a user can act on instead of a traceback deep in a rule.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import errno
import functools
import json
import os
import re
import stat
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from gpu_audit.errors import InputError, UsageError

T = TypeVar("T")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types for dataclasses, enums, lists and dicts (recursively)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON
        return None
    return obj


def from_jsonable(cls: type[T], data: Any, where: str = "$") -> T:
    """Build ``cls`` from JSON data, checking types; raises :class:`InputError` naming the path."""
    return _convert(cls, data, where)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, data, where)
            except InputError as exc:
                errors.append(str(exc))
        raise InputError(errors[0] if errors else f"{where}: unexpected value {data!r}")
    if origin is list:
        if not isinstance(data, list):
            raise InputError(f"{where}: expected a list, got {type(data).__name__}")
        (item,) = typing.get_args(tp) or (Any,)
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object, got {type(data).__name__}")
        _, value_tp = typing.get_args(tp) or (str, Any)
        return {str(k): _convert(value_tp, v, f"{where}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise InputError(f"{where}: {data!r} is not a valid {tp.__name__}") from None
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, data, where)
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        raise InputError(f"{where}: expected a number, got {data!r}")
    if tp in (int, str, bool):
        if isinstance(data, tp) and not (tp is int and isinstance(data, bool)):
            return data
        raise InputError(f"{where}: expected {tp.__name__}, got {data!r}")
    if tp is type(None):
        if data is None:
            return None
        raise InputError(f"{where}: expected null, got {data!r}")
    raise InputError(f"{where}: cannot read a value of type {tp!r}")


def _convert_dataclass(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(f"{where}: missing field {f.name!r}")
    # Unknown keys are tolerated: newer minor versions of a schema may add fields.
    return cls(**kwargs)


def dumps(doc: Any, *, indent: int | None = 2) -> str:
    return json.dumps(to_jsonable(doc), indent=indent, ensure_ascii=False, sort_keys=False)


class UnsafeTarget(UsageError, OSError):
    """An output path that must not be written: a symbolic link, a folder, a socket, a block
    device, or a FIFO nobody reads. An ``OSError`` as well, so callers that turn write
    failures into their own message keep working; uncaught, it exits 3 with its message."""

    def __init__(self, path: Path, reason: str, errno_: int = errno.EINVAL) -> None:
        OSError.__init__(self, errno_, reason, str(path))
        self.args = (f"{path}: {reason}",)

    def __str__(self) -> str:
        return self.args[0]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


_PROC_FD = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd$")


def _behind_fd(path: Path) -> bool:
    """``/proc/PID/fd/N`` (``/dev/fd/N``, ``/dev/stdout``'s target): an open file, maybe a pipe."""
    return bool(_PROC_FD.match(os.path.realpath(path.parent)))


def _trusted_link(link: Path, st: os.stat_result) -> bool:
    """A link that only its owner or root could have put there: owned by root or by us, in a
    folder nobody else can write to (a sticky ``/tmp`` or a shared project folder is not)."""
    uid = os.geteuid()
    if st.st_uid not in (0, uid):
        return False
    try:
        folder = os.stat(link.parent)
    except OSError:
        return False
    writable_by_others = folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return folder.st_uid in (0, uid) and not writable_by_others


def resolve_output(path: Path) -> tuple[Path, os.stat_result | None]:
    """Where an output for ``path`` goes, and that place's ``lstat`` (``None``: absent).

    A symbolic link is followed only when it is trusted (:func:`_trusted_link`: ``/dev/stdout``
    is, a link another user planted in a shared folder is not: :class:`UnsafeTarget`); a
    ``/proc/PID/fd/N`` link (what ``/dev/stdout`` points to) is where resolution stops, as it
    may name a pipe. Character devices, FIFOs and regular files may be written; a folder, a
    socket or a block device is refused with :class:`UnsafeTarget` (exit 3).
    """
    original = path = Path(path)
    for _ in range(40):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return path, None
        if stat.S_ISLNK(st.st_mode):
            if not _trusted_link(path, st):
                raise UnsafeTarget(original, "is a symbolic link in a folder others can write "
                                   "to (or owned by another user); gpu-audit does not follow "
                                   "it: name the real file", errno.ELOOP)
            if _behind_fd(path):
                st = os.stat(path)  # the open file behind the descriptor
                if stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode) \
                        or stat.S_ISFIFO(st.st_mode):
                    return path, st
                break
            path = Path(os.path.normpath(path.parent / os.readlink(path)))
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return path, st
        break
    else:
        raise UnsafeTarget(original, "has too many levels of symbolic links", errno.ELOOP)
    raise UnsafeTarget(original, f"is {_kind(st.st_mode)}, not a file gpu-audit can write",
                       errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL)


def check_output_target(path: Path) -> os.stat_result | None:
    """:func:`resolve_output`'s stat of the place ``path`` writes to (``None``: absent)."""
    return resolve_output(path)[1]


def open_special_for_writing(path: Path, *, append: bool = False) -> int:
    """A write descriptor for a character device or FIFO (or the file behind a
    ``/proc/PID/fd/N`` link: :func:`resolve_output`), never following any other link.

    A FIFO is opened non-blocking, so one that nobody reads is an error instead of a hang; the
    descriptor is then made blocking so a slow reader gets everything.
    """
    path = Path(path)
    behind_fd = _behind_fd(path)
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC
    flags |= os.O_APPEND if append else 0
    if not behind_fd:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UnsafeTarget(path, "is a FIFO with no reader; start the reader first",
                               errno.ENXIO) from None
        if exc.errno == errno.ELOOP:
            raise UnsafeTarget(path, "is a symbolic link; gpu-audit does not write through "
                                     "links (name the real file)", errno.ELOOP) from None
        raise
    st = os.fstat(fd)
    if behind_fd and stat.S_ISREG(st.st_mode):
        if not append:  # `--junit /dev/stdout > file`: the file holds the document alone
            os.ftruncate(fd, 0)
    elif not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        os.close(fd)
        raise UnsafeTarget(path, "changed while it was opened; refusing to write it")
    os.set_blocking(fd, True)
    return fd


def write_through(fd: int, data: bytes) -> None:
    """Everything in ``data`` to ``fd`` (closed afterwards)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str | bytes, *, mode: int | None = None) -> Path:
    """Write a temporary file in the same folder, then rename: no reader sees half a file.

    The temporary file is created exclusively (``O_EXCL``, never through a link) next to the
    target, and the rename replaces only a regular file or nothing: a character device
    (``/dev/null``, a terminal) or a FIFO is written through instead; a symbolic link is
    followed only when no other user could have planted it, and a folder, a socket or a block
    device is refused (:func:`resolve_output`; :class:`UnsafeTarget`, exit 3).
    ``mode``: the new file's permission bits (set before the rename; default 0600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    target, st = resolve_output(path)
    if st is not None and (not stat.S_ISREG(st.st_mode) or _behind_fd(target)):
        write_through(open_special_for_writing(target), data)
        return path
    import tempfile  # here: a scan that writes no report never needs it

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
