"""Documents (msgspec structs) to JSON and back, and atomic file writes.

Loading is strict about types and names the offending field, so a hand-edited or truncated
``--from`` file gives a message a user can act on instead of a traceback deep in a rule.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gpu_audit.errors import InputError, UsageError
from gpu_audit.lazy import regex

if TYPE_CHECKING:
    from pathlib import Path

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


def extended(name: str, base: type[msgspec.Struct], before: list[tuple[str, Any]],
             after: list[tuple[str, Any]], moved: tuple[str, ...] = (),
             module: str = __name__) -> type[msgspec.Struct]:
    """A struct type ``name`` with ``base``'s fields between ``before`` and ``after`` (``moved``
    taken out of ``base``: they are named in ``before``), in the order a document prints them:
    a document that carries a model's fields declares only what it adds."""
    own: list[Any] = []
    for f in msgspec.structs.fields(base):
        if f.name in moved:
            continue
        if f.required:
            own.append((f.name, f.type))
        elif f.default_factory is not msgspec.NODEFAULT:
            own.append((f.name, f.type, msgspec.field(default_factory=f.default_factory)))
        else:
            own.append((f.name, f.type, f.default))
    return msgspec.defstruct(name, [*before, *own, *after], kw_only=True, module=module)


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types for structs, dataclasses, enums, lists and dicts (recursively); NaN
    and infinities become ``None``, as JSON has no word for them."""
    try:
        return _DECODER.decode(_ENCODER.encode(obj))
    except UnicodeEncodeError:  # a lone surrogate (undecodable bytes in a command line)
        return _plain(obj)


def from_jsonable(cls: type[T], data: Any, where: str = "$") -> T:
    """Build ``cls`` from JSON data, checking types; raises :class:`InputError` naming the path.

    Unknown keys are tolerated: newer minor versions of a schema may add fields.
    """
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise InputError(_validation_message(str(exc), data, where)) from None


def decode(cls: type[T], text: str | bytes, where: str = "$") -> T:
    """Build ``cls`` straight from JSON text (no intermediate dicts); errors as
    :func:`from_jsonable`'s."""
    try:
        return msgspec.json.decode(text, type=cls)
    except msgspec.ValidationError as exc:
        raise InputError(_validation_message(str(exc), None, where)) from None


# Read only to word a refused document's message: compiled on first use.
_AT = regex(r"^(?P<what>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.S)
_MISSING = regex(r"^Object missing required field `(?P<name>[^`]*)`$")
_EXPECTED = regex(r"^Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`$")
_STEP = regex(r"\.([^.\[]+)|\[(\d+)\]")


def _validation_message(message: str, data: Any, where: str) -> str:
    """``$.gpus[0].index: expected int, got 'lots'`` from msgspec's wording, with ``$``
    replaced by ``where`` (a file name, say) and the offending value shown when it is known."""
    parts = _AT().match(message)
    what, path = parts["what"], parts["path"] or "$"
    place = where + path[1:]
    missing = _MISSING().match(what)
    if missing:
        return f"{place}: missing field {missing['name']!r}"
    expected = _EXPECTED().match(what)
    if expected:
        value = _value_at(data, path)
        got = expected["got"] if value is _UNKNOWN else _shown(value)
        return f"{place}: expected {expected['want']}, got {got}"
    return f"{place}: {what[:1].lower()}{what[1:]}"


_UNKNOWN = object()


def _value_at(data: Any, path: str) -> Any:
    for name, index in _STEP().findall(path[1:]):
        try:
            data = data[int(index)] if index else data[name]
        except (KeyError, IndexError, TypeError):
            return _UNKNOWN
    return data


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# msgspec spells some floats differently from Python (``1e16``, ``0.00001``); documents keep
# Python's spelling (``1e+16``, ``1e-05``) so they stay byte-for-byte what they were. The hint
# looks for such a number where a value starts (compact JSON: after ``:``, ``,`` or ``[``), not
# inside strings, where UUIDs and hashes are full of digits before an "e". The hint begins with
# the character before the value, so that the search skips ahead to those characters (a third
# of the instructions of ``(?:^|[:,\[])...``); a bare number, at the start, is matched apart.
_FLOAT_HINT = re.compile(rb"[:,\[]-?(?:\d+(?:\.\d+)?[eE]|0\.0000)")


@functools.cache
def _float_first() -> re.Pattern[bytes]:
    """The hint for a document that is one bare number."""
    return re.compile(rb"-?(?:\d+(?:\.\d+)?[eE]|0\.0000)")


@functools.cache
def _token() -> re.Pattern[bytes]:
    """The tokens a hinted document is re-read by: compiled only for such a document."""
    return re.compile(rb'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def _python_float(match: re.Match[bytes]) -> bytes:
    token = match.group()
    if token[0] == 0x22 or not (b"e" in token or b"." in token):  # a string, an integer
        return token
    return repr(float(token)).encode()


def encode(doc: Any) -> bytes:
    """Compact JSON bytes for a document (structs, dataclasses, enums, dicts, lists)."""
    raw = _ENCODER.encode(doc)
    return _token().sub(_python_float, raw) if _float_hinted(raw) else raw


def _float_hinted(raw: bytes) -> bool:
    """Whether ``raw`` may hold a float that msgspec spells otherwise than Python."""
    return bool(_FLOAT_HINT.search(raw) or (
        raw[:1] in b"-0123456789" and _float_first().match(raw)))


def dumps(doc: Any, *, indent: int | None = 2) -> str:
    """The document as JSON text, ``indent`` spaces deep (``None``: one line), non-ASCII kept,
    keys in declaration order; NaN and infinities are ``null``."""
    try:
        raw = encode(doc)
    except UnicodeEncodeError:  # a lone surrogate: the text keeps it, as json.dumps did
        import json

        return json.dumps(_plain(doc), indent=indent, ensure_ascii=False, sort_keys=False)
    return msgspec.json.format(raw, indent=indent if indent is not None else 0).decode()


def _plain(obj: Any) -> Any:
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return _plain(msgspec.to_builtins(obj, str_keys=True))


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


_PROC_FD = regex(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd$")


def _behind_fd(path: Path) -> bool:
    """``/proc/PID/fd/N`` (``/dev/fd/N``, ``/dev/stdout``'s target): an open file, maybe a pipe."""
    return bool(_PROC_FD().match(os.path.realpath(path.parent)))


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
    from pathlib import Path  # here: a plain scan writes no file

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
    from pathlib import Path

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
    from pathlib import Path

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
