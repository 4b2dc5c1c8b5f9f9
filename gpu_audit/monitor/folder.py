"""The runtime folder as the writer holds it: opened once, every write relative to its descriptor.

A folder checked by path and then written by path can be swapped between the two (renamed away
and replaced by a symbolic link to someone else's folder) by whoever can write its parent, which
matters when the runtime folder comes from another user's environment (``sudo -E``). The folder
is opened with ``O_DIRECTORY | O_NOFOLLOW``; its owner and mode are checked on the descriptor
before every write; files are created (``O_EXCL | O_NOFOLLOW``), renamed and removed with
``dir_fd``. When the path no longer names the folder held, nothing is written there any more.

Runs inside the user's training process: the standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpu_audit.publication import folder_status_problem
from gpu_audit.trust import write_atomic_at

_OPEN_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)


class FolderChanged(OSError):
    """The folder is no longer private to this user, or its path now names something else."""


def supported() -> bool:
    """Whether this platform can write relative to a folder's descriptor."""
    # os.replace shares os.rename's implementation; only the latter is listed.
    return {os.open, os.rename, os.unlink} <= os.supports_dir_fd \
        and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")


class PrivateFolder:
    """A private (0700, owned by this user) folder, held open; see the module's docstring."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.fd: int | None = os.open(self.path, _OPEN_DIR)
        except OSError as exc:  # ELOOP: a symbolic link; ENOTDIR: not a folder
            raise FolderChanged(exc.errno, f"cannot open it: {exc.strerror}", str(path)) \
                from None
        try:
            self.check()
        except BaseException:
            self.close()
            raise

    def check(self) -> None:
        """Raise :class:`FolderChanged` unless the folder held is still private to this user and
        its path still names it."""
        if self.fd is None:
            raise FolderChanged("the folder was closed")
        held = os.fstat(self.fd)
        problem = folder_status_problem(held)
        if problem is None:
            try:
                named = os.lstat(self.path)
            except OSError as exc:
                problem = f"its path cannot be examined any more: {exc.strerror or exc}"
            else:
                if (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
                    problem = "its path now names something else (the folder was replaced)"
        if problem is not None:
            raise FolderChanged(f"{self.path} {problem}")

    def write_atomic(self, name: str, data: bytes) -> None:
        """Replace ``name`` in the folder with ``data``: a temporary file, fsync, rename."""
        self.check()
        write_atomic_at(self.fd, name, data, mode=0o600)  # type: ignore[arg-type]

    def unlink(self, name: str) -> None:
        if self.fd is not None:
            os.unlink(name, dir_fd=self.fd)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


