"""The prefilter of a plain log file run by GNU grep: one multi-literal search instead of one
``re`` pass per key.

``grep -a -o -b -E`` (``LC_ALL=C``, nothing else in its environment) reads the open log file
as its standard input (the descriptor explain holds, never a path: nothing can swap the file)
and prints where each key's anchor lies (:class:`~gpu_audit.explain.scanner.Key`: literals, and
``rror`` followed by anything but ``s``, which ``-F`` cannot say; as fast as ``-F`` here). explain
reads the file as before, block by block (``pread``: grep moves the descriptor's offset), and
runs each key's exact pattern only over the lines that hold one of its anchors
(:func:`~gpu_audit.explain.scanner.keyed_on_lines`); the rest of the scanner is the same code,
so the candidates are the same as with the Python passes. grep runs on another core while
explain reads and classifies.

grep is used only at an absolute path (:data:`GREP_PATHS`), only GNU grep (its ``--version``
says so), and only when the trust rule of :mod:`gpu_audit.trust` holds for it (owned by root
or this user, writable by nobody else, nor its folders): explain often runs as root. Without
such a grep, for stdin, pipes and compressed logs, the Python passes run. Every block grep
has not vouched for is scanned by the Python passes: a block whose text grep has not read
wholly yet when grep fails or is killed (its output ends without exit status 0 or 1), a block
with more than :data:`MAX_BLOCK_HITS` anchors (a new grep then starts after it: the rest of
its output is not read), text the file gained after grep started, and the pieces of a line
longer than the scanner's carry.
So a failing grep changes nothing the user sees; grep ends with "memory exhausted" on a line of
hundreds of MB (:data:`GREP_MEMORY`), so its memory stays bounded as explain's does.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from gpu_audit.errors import InputError
from gpu_audit.explain.scanner import KEYS, Key, keyed_on_lines, python_prefilter
from gpu_audit.trust import StateDir, file_problem

GREP_PATHS: tuple[str, ...] = ("/usr/bin/grep", "/bin/grep")
# Above this many anchors in one block the Python passes cost less than the lines' own passes
# (about 20 ms per 4 MiB block against a few us per anchor), and memory stays flat.
MAX_BLOCK_HITS = 1 << 12
_READ = 1 << 16  # bytes of grep's output read at a time
GREP_MEMORY = 256 << 20  # grep's address space (it needs about 20 MiB, and twice its longest line)


@lru_cache(maxsize=1)
def anchor_masks() -> dict[bytes, int]:
    """Each text the search can print (:meth:`Key.found`), and the keys to run on its line:
    its own, and those of any anchor that can start inside it (``grep -o`` prints one of two
    overlapping anchors)."""
    owners: dict[bytes, int] = {}
    for index, key in enumerate(KEYS):
        for text in key.found():
            owners[text] = owners.get(text, 0) | 1 << index
    prefixes: dict[bytes, int] = {}  # every prefix of a text: the keys it may begin
    lengths = sorted({len(text) for text in owners})
    for text, keys in owners.items():
        for size in range(1, len(text) + 1):
            prefixes[text[:size]] = prefixes.get(text[:size], 0) | keys
    masks: dict[bytes, int] = {}
    for text, keys in owners.items():
        for at in range(len(text)):
            rest = text[at:]
            keys |= prefixes.get(rest, 0)  # a text that starts with the rest
            for size in lengths:  # a text that the rest starts with
                if size > len(rest):
                    break
                keys |= owners.get(rest[:size], 0)
        masks[text] = keys
    return masks


_ERE_SPECIAL = re.compile(rb"([.\[\]()*+?{}|^$\\])")


def searched(key: Key) -> tuple[bytes, ...]:
    """The anchors of ``key`` a search needs: one that holds another of the key's anchors finds
    no line the other does not (fewer patterns, a faster grep); all of them where the key takes
    no byte after an anchor (``then_not``)."""
    if key.then_not:
        return key.anchors
    return tuple(anchor for anchor in key.anchors
                 if not any(other != anchor and other in anchor for other in key.anchors))


@lru_cache(maxsize=1)
def grep_patterns() -> bytes:
    """grep's pattern list (``-E -f``): each key's anchors a search needs, one a line."""
    lines = []
    for key in KEYS:
        for anchor in searched(key):
            ere = _ERE_SPECIAL.sub(rb"\\\1", anchor)
            if key.then_not:  # then a byte that is none of these, or the line's end
                ere += b"([^" + key.then_not + b"]|$)"
            lines.append(ere)
    return b"\n".join(lines) + b"\n"


def _trusted(path: str) -> bool:
    """``path`` is a regular executable file that only root or this user can change."""
    where = Path(path)
    try:
        with StateDir.open(where.parent) as folder:
            assert folder.fd is not None
            st = os.stat(where.name, dir_fd=folder.fd, follow_symlinks=False)
    except (OSError, InputError):
        return False
    return file_problem(st) is None and bool(st.st_mode & stat.S_IXUSR)


@lru_cache(maxsize=8)
def _is_gnu(path: str, identity: tuple[int, int, int, int]) -> bool:
    """GNU grep answers ``--version`` with its name (checked once per binary)."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, env={"LC_ALL": "C"},
                              stdin=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.startswith(b"grep (GNU grep) ")


def find_grep() -> str | None:
    """The first of :data:`GREP_PATHS` that is a trusted GNU grep, or None."""
    if os.name != "posix":
        return None
    for path in GREP_PATHS:
        if os.path.isabs(path) and _trusted(path):
            st = os.stat(path)
            if _is_gnu(path, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)):
                return path
    return None


def _cap_memory(pid: int) -> None:
    """Keep grep's memory bounded as explain's is: grep holds a whole line, so a line of
    hundreds of MB ends it ("memory exhausted"), and the Python passes take over."""
    try:
        import resource

        resource.prlimit(pid, resource.RLIMIT_AS, (GREP_MEMORY, GREP_MEMORY))
    except (ImportError, AttributeError, OSError, ValueError):
        pass  # (not Linux, or grep has ended already)


def grep_command(grep: str, patterns: str) -> list[str]:
    """grep's command line: every anchor in the standard input with its byte offset, a line
    each, as soon as found (so that explain works on the blocks grep has passed)."""
    return [grep, "-a", "-o", "-b", "-E", "--line-buffered", "-f", patterns]


class GrepPrefilter:
    """A :data:`~gpu_audit.explain.scanner.Prefilter` for the regular file open at ``fd``,
    from one grep over it; call :meth:`close` when done (a context manager)."""

    def __init__(self, grep: str, fd: int) -> None:
        self._grep, self._fd = grep, fd
        self._size = os.fstat(fd).st_size  # grep reads at least this far (or fails)
        self._upto = 0  # offsets below this were handed out (or skipped)
        self.failed = False  # grep ended without vouching for everything up to the end
        self.blocks = [0, 0]  # blocks scanned from grep's anchors, by the Python passes
        self._start(0)

    def _start(self, offset: int) -> None:
        """Start grep on the file from ``offset`` (it prints offsets from there)."""
        patterns_read, patterns_write = os.pipe()
        try:
            os.write(patterns_write, grep_patterns())
            os.close(patterns_write)
            os.lseek(self._fd, offset, os.SEEK_SET)
            self._proc = subprocess.Popen(
                grep_command(self._grep, f"/dev/fd/{patterns_read}"),
                stdin=self._fd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env={"LC_ALL": "C"}, pass_fds=(patterns_read,))
        finally:
            os.close(patterns_read)
        _cap_memory(self._proc.pid)
        assert self._proc.stdout is not None
        self._out = self._proc.stdout.fileno()
        self._base = offset
        self._lines: list[bytes] = []  # grep's output lines not used yet
        self._next = 0
        self._partial = b""
        self._last = -1  # the last offset grep printed
        self._dense = False  # more than MAX_BLOCK_HITS anchors in the block asked for

    def __enter__(self) -> GrepPrefilter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __call__(self, buf: bytes, lo: int, end: int, origin: int
                 ) -> tuple[list[int], list[int]]:
        first, last = origin + lo, origin + end
        whole_lines = (end > lo and (first == 0 or (lo > 0 and buf[lo - 1] == 10))
                       and (buf[end - 1] == 10 or last == self._size) and last <= self._size)
        found = self._take(last) if first >= self._upto else None
        self._upto = max(self._upto, last)
        if self._dense:  # a flood of anchors: a new grep from the next line on, unread
            self.close()
            try:
                if buf[end - 1] != 10 or last >= self._size:
                    raise OSError("not at a line's start")
                self._start(last)
            except OSError:
                self.failed = True
        masks = anchor_masks()
        try:
            anchored = None if found is None or not whole_lines else [
                (offset - origin, masks[anchor]) for offset, anchor in found if offset >= first]
        except KeyError:  # not one of the anchors: not the output expected of GNU grep
            self.failed = True
            anchored = None
        if anchored is None:
            self.blocks[1] += 1
            return python_prefilter(buf, lo, end)
        self.blocks[0] += 1
        return keyed_on_lines(buf, lo, end, anchored)

    def _take(self, limit: int) -> list[tuple[int, bytes]] | None:
        """grep's anchors before offset ``limit``, once grep has shown it read that far; None
        when it failed or there are more than MAX_BLOCK_HITS (``_dense``)."""
        found: list[tuple[int, bytes]] = []
        while not self.failed:
            lines, at = self._lines, self._next
            while at < len(lines):
                offset_text, _, anchor = lines[at].partition(b":")
                try:
                    offset = int(offset_text) + self._base
                except ValueError:
                    self.failed = True
                    return None
                if offset < self._last:
                    self.failed = True
                    return None
                self._last = offset
                if offset >= limit:
                    self._next = at
                    return found
                at += 1
                found.append((offset, anchor))
                if len(found) > MAX_BLOCK_HITS:
                    self._dense = True
                    return None
            self._next = len(lines)
            if not self._fill():
                return None if self.failed else found
        return None

    def _fill(self) -> bool:
        """Read grep's next output lines; False at its end, with ``failed`` set unless grep
        exited with 0 or 1 after a whole line."""
        while True:
            try:
                data = os.read(self._out, _READ)
            except OSError:
                data = b""
            if not data:
                self.failed = self._proc.wait() not in (0, 1) or bool(self._partial)
                self._lines, self._next = [], 0
                return False
            data = self._partial + data
            cut = data.rfind(b"\n") + 1
            self._partial = data[cut:]
            if cut:
                self._lines, self._next = data[:cut - 1].split(b"\n"), 0
                return True


class PreadReader:
    """A file read with ``pread`` from offset 0 (the descriptor's offset is grep's)."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._offset = 0

    def read(self, size: int) -> bytes:
        data = os.pread(self._handle.fileno(), size, self._offset)
        self._offset += len(data)
        return data

    def close(self) -> None:
        self._handle.close()

    def fileno(self) -> int:
        return self._handle.fileno()
