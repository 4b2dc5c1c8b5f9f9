"""Opening files gpu-audit reads: never blocking on a FIFO, never reading without end.

Every input (``--config``, ``--from``, ``snapshot FILE``, ``explain FILE``, the step summary
that is appended to) is opened here. A file meant to be a regular file is opened non-blocking,
checked with ``fstat`` and refused when it is a FIFO, a device, a socket or a folder; its size is
checked against the limit before reading. A stream (stdin, a FIFO given to ``explain``) is read
through :class:`CappedReader`, which stops with an :class:`~gpu_audit.errors.InputError` past its
limit, so ``/dev/zero`` or a decompression bomb cannot run forever or fill the memory.
"""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

# The size limits are declared with every other ceiling in gpu_audit.bounds.
from gpu_audit.bounds import (  # noqa: F401 - the readers' limits, imported from here
    CONFIG_LIMIT,
    DECOMPRESSED_LIMIT,
    SNAPSHOT_LIMIT,
    STREAM_LIMIT,
    SUMMARY_LIMIT,
)
from gpu_audit.bounds import MAX_DOCUMENT_BYTES as DOCUMENT_LIMIT  # noqa: F401
from gpu_audit.errors import InputError
from gpu_audit.units import fmt_bytes


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_input(path: str | os.PathLike[str], *, allow_stream: bool = False
               ) -> tuple[BinaryIO, os.stat_result]:
    """A blocking binary reader of ``path`` and its ``fstat``.

    The open itself never blocks (``O_NONBLOCK``: a FIFO without a writer opens at once and then
    reads as empty). Anything but a regular file is refused (a device such as ``/dev/zero``
    included), except a FIFO when ``allow_stream`` (the caller must then read it through
    :class:`CappedReader`).
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory, not a file") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot open: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or (allow_stream and stat.S_ISFIFO(st.st_mode))):
        os.close(fd)
        raise InputError(f"{name}: is {_kind(st.st_mode)}; a regular file is needed")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), st


def read_input(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> bytes:
    """The whole of the regular file ``path``, refused (``InputError``) past ``limit`` bytes."""
    handle, st = open_input(path)
    with handle:
        if st.st_size > limit:
            raise InputError(f"{os.fspath(path)}: {fmt_bytes(st.st_size)} is more than a {what} "
                             f"may hold ({fmt_bytes(limit)})")
        try:
            data = _read_upto(handle, limit + 1, st.st_size)
        except OSError as exc:
            raise InputError(f"{os.fspath(path)}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:  # it grew while being read
        raise InputError(f"{os.fspath(path)}: more than a {what} may hold ({fmt_bytes(limit)})")
    return data


def _read_upto(handle: io.BufferedReader, most: int, expected: int) -> bytes:
    """At most ``most`` bytes, in pieces: ``read(n)`` would set aside all ``n`` bytes at once."""
    pieces, got = [], 0
    step = max(min(expected + 1, most), 1)
    while got < most:
        piece = handle.read(min(step, most - got))
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
        step = min(max(step, 1 << 20), most - got) or 1
    return b"".join(pieces)


def read_input_text(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> str:
    """:func:`read_input` decoded as UTF-8 (an ``InputError`` when it is not)."""
    data = read_input(path, limit=limit, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{os.fspath(path)}: not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start})") from None


class CappedReader(io.RawIOBase):
    """A binary stream that raises :class:`InputError` once more than ``limit`` bytes came."""

    def __init__(self, stream: BinaryIO, limit: int, message: str) -> None:
        super().__init__()
        self._stream = stream
        self._left = limit
        self._message = message

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        want = len(buffer)
        data = self._stream.read(want)
        if len(data) > self._left:
            raise InputError(self._message)
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            chunks = []
            while chunk := self.read(1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        data = self._stream.read(size)
        if len(data) > self._left:
            raise InputError(self._message)
        self._left -= len(data)
        return data

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()

