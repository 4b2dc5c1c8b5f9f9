"""The one trust rule for what gpu-audit reads back as a decision, and its state folders.

gpu-audit runs as root in Slurm prologs and epilogs and resumes validation runs whose plan names
a command to execute. A file it reads back and acts on (a run's plan, state, cycle log and
checkpoints, the hooks' spool records, stream files) is trusted only when:

- it is a regular file, opened without following a link (``O_NOFOLLOW``) and without blocking
  (``O_NONBLOCK``: a FIFO planted in its place cannot stall a hook);
- it is owned by the user running gpu-audit, or by root, and nobody else may write it;
- the folder holding it has the same properties, and so does every folder above it, walked
  from ``/`` one descriptor at a time. A folder above may be writable by others only when it is
  sticky (``/tmp``): there nobody can rename or remove another user's entry. A symbolic link on
  the way is followed only when its owner is trusted the same way (``/var/run -> /run``).

A state folder (the spool, a run folder) is opened once through that walk and then used by its
descriptor: every record in it is created, read, renamed and removed relative to it
(``dir_fd``), so renaming the folder away and putting a link in its place afterwards changes
nothing, and no name gpu-audit gives its own records is ever followed as a link.

Standard library only: the runtime layer (inside a training process) uses it too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpu_audit.bounds import MAX_DOCUMENT_BYTES, load_json
from gpu_audit.errors import InputError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_READ = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_MAX_LINKS = 40  # as the kernel's own limit on links in one path walk


class Untrusted(InputError):
    """A file or folder gpu-audit would act on that someone else could have changed (exit 3)."""


class MissingFolder(InputError):
    """A folder on the way does not exist (and was not to be created)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: no such folder")
        self.path = path


def supported() -> bool:
    """Whether this platform can walk and use folders by descriptor (Linux, the BSDs, macOS)."""
    return {os.open, os.rename, os.unlink, os.stat, os.mkdir} <= os.supports_dir_fd \
        and bool(_NOFOLLOW) and hasattr(os, "O_DIRECTORY")


def trusted_owner(uid: int) -> bool:
    return uid in (0, os.geteuid())


def _owner_problem(st: os.stat_result) -> str | None:
    if trusted_owner(st.st_uid):
        return None
    return f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}) or root"


def folder_problem(st: os.stat_result, *, above: bool = False) -> str | None:
    """Why a folder cannot hold trusted files (``None``: it can). ``above``: a folder on the way
    to the state folder, which may be writable by others when sticky (``/tmp``)."""
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    problem = _owner_problem(st)
    if problem:
        return problem
    if st.st_mode & 0o022 and not (above and st.st_mode & stat.S_ISVTX):
        return (f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}; "
                "`chmod go-w` it if that is not meant)")
    return None


def file_problem(st: os.stat_result) -> str | None:
    """Why a file cannot be trusted as a decision (``None``: it can)."""
    if not stat.S_ISREG(st.st_mode):
        return f"is {kind_of(st.st_mode)}, not a regular file"
    problem = _owner_problem(st)
    if problem:
        return problem
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def kind_of(mode: int) -> str:
    """``a FIFO``, ``a symbolic link``, ... : what a file of this mode is, for messages."""
    kinds = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link"))
    for test, name in kinds:
        if test(mode):
            return name
    return "not a regular file"


def _walk(path: Path, *, create_mode: int | None) -> int:
    """A descriptor of the folder ``path``, reached from ``/`` one trusted folder at a time."""
    parts = list(Path(os.path.abspath(path)).parts[1:])
    here = Path("/")
    fd = os.open("/", _OPEN_DIR)
    links = 0
    try:
        _check_folder(fd, here, above=bool(parts))
        while parts:
            name = parts.pop(0)
            try:
                child = _open_child(fd, name, here, create=create_mode is not None and not parts,
                                    mode=create_mode or 0o700)
            except _Link as link:
                if not parts:  # the state folder itself: gpu-audit names it, never a link
                    raise Untrusted(f"{here / name} is a symbolic link: name the real folder") \
                        from None
                links += 1
                if links > _MAX_LINKS:
                    raise Untrusted(f"{path}: too many levels of symbolic links") from None
                rest = Path(os.path.normpath(here / link.target / Path(*parts or ["."])))
                parts = list(rest.parts[1:])
                here = Path("/")
                os.close(fd)
                fd = os.open("/", _OPEN_DIR)
                continue
            os.close(fd)
            fd, here = child, here / name
            _check_folder(fd, here, above=bool(parts))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_folder(path: Path, *, create_mode: int | None = None) -> int:
    """A descriptor of the folder ``path`` reached through the trusted walk (``create_mode``:
    make its last component with this mode when missing); the caller closes it.
    :class:`Untrusted` or :class:`MissingFolder` when the rule refuses it."""
    if not supported():  # pragma: no cover - Windows: no descriptor-relative calls
        raise Untrusted(f"{path}: this platform cannot open folders by descriptor")
    return _walk(Path(path), create_mode=create_mode)


class _Link(Exception):
    def __init__(self, target: str) -> None:
        self.target = target


def _open_child(fd: int, name: str, here: Path, *, create: bool, mode: int) -> int:
    try:
        return os.open(name, _OPEN_DIR, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise MissingFolder(here / name) from None
        with contextlib.suppress(FileExistsError):  # made meanwhile: judged like any other
            os.mkdir(name, mode, dir_fd=fd)
        return os.open(name, _OPEN_DIR, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise Untrusted(f"{here / name}: cannot open it ({exc.strerror or exc})") from None
    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if not stat.S_ISLNK(st.st_mode):
        raise Untrusted(f"{here / name} is {kind_of(st.st_mode)}, not a folder")
    if not trusted_owner(st.st_uid):
        raise Untrusted(f"{here / name} is a symbolic link owned by uid {st.st_uid}, not by "
                        "this user or root: not followed")
    raise _Link(os.readlink(name, dir_fd=fd))


def _check_folder(fd: int, where: Path, *, above: bool) -> None:
    problem = folder_problem(os.fstat(fd), above=above)
    if problem:
        raise Untrusted(f"{where} {problem}: gpu-audit does not act on what another user "
                        "could change")


class StateDir:
    """A folder gpu-audit keeps decisions in, held by descriptor; see the module docstring."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = Path(path)
        self.fd: int | None = fd

    @classmethod
    def open(cls, path: Path, *, create_mode: int | None = None) -> StateDir:
        """Open ``path`` through the trusted walk; ``create_mode``: make its last component
        (only that) with this mode when it is missing."""
        return cls(Path(path), open_folder(path, create_mode=create_mode))

    def __enter__(self) -> StateDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    def _fd(self) -> int:
        if self.fd is None:
            raise ValueError(f"{self.path}: the folder was closed")
        return self.fd

    def read(self, name: str, *, limit: int = MAX_DOCUMENT_BYTES) -> bytes | None:
        """The trusted file's bytes (``None``: there is none); anything else is
        :class:`Untrusted`, a file over ``limit`` bytes an :class:`InputError`."""
        try:
            fd = os.open(name, _READ, dir_fd=self._fd())
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Untrusted(f"{self.path / name} is a symbolic link: gpu-audit never "
                                "follows links in its own folders") from None
            raise InputError(f"{self.path / name}: cannot read it ({exc.strerror or exc})") \
                from None
        with os.fdopen(fd, "rb") as handle:
            problem = file_problem(os.fstat(fd))
            if problem:
                raise Untrusted(f"{self.path / name} {problem}: refusing to act on it")
            os.set_blocking(fd, True)
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"{self.path / name}: larger than the {limit} bytes accepted")
        return data

    def read_json(self, name: str, *, limit: int = MAX_DOCUMENT_BYTES) -> Any:
        """The trusted file's JSON (``None``: there is none), bounded (:func:`load_json`)."""
        data = self.read(name, limit=limit)
        return None if data is None else load_json(data, str(self.path / name), limit=limit)

    def write_atomic(self, name: str, data: str | bytes, *, mode: int = 0o600) -> Path:
        """Replace ``name`` with ``data`` (:func:`write_atomic_at`)."""
        write_atomic_at(self._fd(), name, data.encode("utf-8") if isinstance(data, str) else data,
                        mode=mode)
        return self.path / name

    def unlink(self, name: str) -> bool:
        """Remove ``name`` (a link itself, never its target); ``False`` when it was absent."""
        try:
            os.unlink(name, dir_fd=self._fd())
        except FileNotFoundError:
            return False
        return True

    def regular_files(self) -> Iterator[tuple[str, os.stat_result]]:
        """The folder's regular files (links and everything else left out), with their stat."""
        with os.scandir(self._fd()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):
                        yield entry.name, st


def write_atomic_at(dir_fd: int, name: str, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``name`` in the folder held by ``dir_fd`` with ``data``: a new file created
    exclusively (never through a link), fsync, then a rename within the folder. A link or
    anything else at ``name`` is replaced, never written through."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, _CREATE, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)  # whatever the umask
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
