"""The command's output on its way to the stage log and the patterns: lines in linear time, a cap.

The supervisor reads what the command prints in chunks (however long its lines) and:

- :class:`OutputLines` splits the chunks into lines, takes the hook's cycle markers out
  (:data:`~gpu_audit.validate.script.hook.MARKER`, always at the end of a line) and gives each
  line's first :data:`LINE_SCAN_BYTES` to the cycle pattern and the metric regexes; the rest of
  a longer line is copied to the log and counted, never held or searched. A regex can cost the
  square of what it searches (``.*loss=(\\S+)`` takes a second on 64 KiB), so what it sees is
  kept to what a metric line needs;
- :class:`StageLog` copies the output into the stage log (the worker's stderr,
  ``logs/<variant>.<stage>.log``), at most :data:`LOG_MAX_BYTES` of it per attempt at a stage:
  the first three quarters as printed, then a rolling tail of the last quarter, written when the
  stage ends after a line that says how many bytes were left out between them. The runner's
  request for stacks (SIGUSR1, before it stops a hung stage) writes the tail so far at once, so
  the stacks that follow reach the file before the stop (:data:`SPILL_BYTES`, a few times).
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections import deque
from typing import BinaryIO

from gpu_audit.units import KIB, MIB, fmt_bytes
from gpu_audit.validate.script.hook import MARKER

# The command's output kept in one stage log per attempt (a training run's log over a stage is
# megabytes; a command printing gigabytes must not fill the run's disk).
LOG_MAX_BYTES = 64 * MIB
LOG_MIN_BYTES = 64 * KIB  # the smallest cap GPU_AUDIT_SCRIPT_LOG_MAX_BYTES may set
ENV_LOG_MAX = "GPU_AUDIT_SCRIPT_LOG_MAX_BYTES"  # a smaller (or larger) cap, in bytes
LOG_MAX_CEILING = 64 * 1024**3  # the largest cap it may set
SPILL_BYTES = 1 * MIB  # written straight through after a request for stacks
MAX_SPILLS = 4  # requests for stacks honoured so (the command can send SIGUSR1 too)
WRITE_BUFFER = 256 * KIB  # output gathered before a write to the log
# What the cycle pattern and metric regexes see of one line (metric lines are short; see above).
LINE_SCAN_BYTES = 16 * KIB
MARKER_MAX = 512  # a cycle marker's longest form: marker, stream name, source, cycle number
_MARKER = MARKER.encode()


def log_limit(text: str | None) -> tuple[int, str | None]:
    """The stage log's cap from ``GPU_AUDIT_SCRIPT_LOG_MAX_BYTES`` (unset: the default), and a
    note when the value was not used."""
    if not text:
        return LOG_MAX_BYTES, None
    value = text.strip()
    if value.isascii() and value.isdigit() and len(value) <= 20 \
            and LOG_MIN_BYTES <= int(value) <= LOG_MAX_CEILING:
        return int(value), None
    return LOG_MAX_BYTES, (f"{ENV_LOG_MAX}={text[:40]!r} is not a number of bytes from "
                           f"{LOG_MIN_BYTES} to {LOG_MAX_CEILING}: the stage log was capped at "
                           f"{fmt_bytes(LOG_MAX_BYTES, precision=0)}")


class StageLog:
    """The command's output into the log open as ``fd``, within ``limit`` bytes (see the module
    docstring). Thread-safe: the output's reader writes, the supervisor's loop flushes and, as
    the stage ends, closes it."""

    def __init__(self, fd: int, limit: int = LOG_MAX_BYTES) -> None:
        self.fd = fd
        self.limit = limit
        self.tail_max = limit // 4
        self.head_left = limit - self.tail_max
        self.through = 0  # bytes that may still go straight to the file after a spill
        self.spills = 0
        self.tail: deque[bytes] = deque()
        self.tail_bytes = 0
        self.dropped = 0  # bytes of output left out of the log
        self.said = 0  # of them, those a line in the log already states
        self.total = 0  # bytes of output seen
        self.pending = bytearray()
        self.closed = False
        self.lock = threading.Lock()

    def write(self, data: bytes) -> None:
        if not data:
            return
        with self.lock:
            self.total += len(data)
            if self.closed:
                self.dropped += len(data)
                return
            for budget in ("head_left", "through"):
                room = getattr(self, budget)
                if room and data:
                    part = data[:room]
                    self.pending += part
                    setattr(self, budget, room - len(part))
                    data = data[len(part):]
            if data:
                self.tail.append(data)
                self.tail_bytes += len(data)
                self._trim()
            if len(self.pending) >= WRITE_BUFFER:
                self._write_pending()

    def _trim(self) -> None:
        while self.tail_bytes > self.tail_max:
            excess = self.tail_bytes - self.tail_max
            first = self.tail[0]
            if len(first) <= excess:
                self.tail.popleft()
                cut = len(first)
            else:
                self.tail[0] = first[excess:]
                cut = excess
            self.tail_bytes -= cut
            self.dropped += cut

    def flush(self) -> None:
        with self.lock:
            self._write_pending()

    def spill(self) -> None:
        """The tail so far into the file now, and the next :data:`SPILL_BYTES` straight after
        it (a few times per stage at most)."""
        with self.lock:
            if self.closed or self.spills >= MAX_SPILLS:
                return
            self.spills += 1
            self._tail_to_file()
            self.through = SPILL_BYTES

    def settle(self) -> None:
        """The tail so far into the file (the command has ended; a re-run's output, if any,
        follows it, again within a tail's room)."""
        with self.lock:
            if not self.closed:
                self._tail_to_file()

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self._tail_to_file()
                self.closed = True

    def _tail_to_file(self) -> None:
        if self.dropped > self.said:
            self.pending += (f"\n[gpu-audit: {self.dropped - self.said} bytes of the command's "
                             f"output left out here; the stage log keeps the first "
                             f"{fmt_bytes(self.limit - self.tail_max)} and the last "
                             f"{fmt_bytes(self.tail_max)} of it]\n").encode()
            self.said = self.dropped
        while self.tail:
            self.pending += self.tail.popleft()
        self.tail_bytes = 0
        self._write_pending()

    def _write_pending(self) -> None:
        view = memoryview(self.pending)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            pass  # a full disk or a closed log: the output is lost, the stage goes on
        finally:
            view.release()
            self.pending.clear()

    def note(self) -> str | None:
        """What the report says of a capped log, or ``None``."""
        if not self.dropped:
            return None
        return (f"the command printed {self.total} bytes, more than the stage log keeps "
                f"({fmt_bytes(self.limit, precision=0)}): its first "
                f"{fmt_bytes(self.limit - self.tail_max)} and last {fmt_bytes(self.tail_max)} "
                f"are in the log, {self.dropped} bytes were left out")


class OutputLines:
    """The command's output, a chunk at a time, as bytes for the log and lines for the
    patterns (see the module docstring). Linear in what it is given: a line's bytes past
    :data:`LINE_SCAN_BYTES` are only copied on to the log, a few hundred held back while they
    may be the start of a marker."""

    def __init__(self, scan_bytes: int = LINE_SCAN_BYTES) -> None:
        self.scan_bytes = scan_bytes
        self.scan = bytearray()  # the current line's first scan_bytes
        self.held = bytearray()  # its bytes not yet given to the log
        self.length = 0  # its length so far
        self.long_lines = 0  # lines longer than scan_bytes (markers aside)
        self.unscanned = 0  # their bytes that no pattern saw

    def feed(self, data: bytes) -> tuple[bytes, list[tuple[str, bool]]]:
        """The bytes of ``data`` for the log and the lines it completes, each as ``(text,
        is_marker)``."""
        log = bytearray()
        lines: list[tuple[str, bool]] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            self._add(data[start:] if end < 0 else data[start:end])
            if end < 0:
                break
            self._end_line(log, lines)
            start = end + 1
        if len(self.held) > MARKER_MAX:  # the rest of a long line: on to the log
            cut = len(self.held) - MARKER_MAX
            log += self.held[:cut]
            del self.held[:cut]
        return bytes(log), lines

    def finish(self) -> tuple[bytes, list[tuple[str, bool]]]:
        """The output's end: its last line, if it had no newline."""
        log = bytearray()
        lines: list[tuple[str, bool]] = []
        if self.length:
            self._end_line(log, lines)
        return bytes(log), lines

    def _add(self, piece: bytes) -> None:
        room = self.scan_bytes - len(self.scan)
        if room > 0:
            self.scan += piece[:room]
        self.held += piece
        self.length += len(piece)

    def _end_line(self, log: bytearray, lines: list[tuple[str, bool]]) -> None:
        at = self.held.rfind(_MARKER, max(0, len(self.held) - MARKER_MAX))
        marker = None
        if at >= 0:  # a marker ends the line, maybe after output printed without a newline
            marker = bytes(self.held[at:]).decode("utf-8", "replace").rstrip("\r")
            text_length = self.length - (len(self.held) - at)
            del self.held[at:]
        else:
            text_length = self.length
        if marker is None or text_length:
            log += self.held
            log += b"\n"
            if text_length > self.scan_bytes:
                self.long_lines += 1
                self.unscanned += text_length - self.scan_bytes
            text = bytes(self.scan[:text_length]).decode("utf-8", "replace").rstrip("\r")
            lines.append((text, False))
        if marker is not None:
            lines.append((marker, True))
        self.scan.clear()
        self.held.clear()
        self.length = 0

    def note(self) -> str | None:
        if not self.long_lines:
            return None
        return (f"{self.long_lines} output line(s) were longer than "
                f"{fmt_bytes(self.scan_bytes, precision=0)}: --cycle-pattern and --metric "
                f"looked at their first {fmt_bytes(self.scan_bytes, precision=0)} only "
                f"({self.unscanned} bytes past them were not searched)")


# What a short helper run keeps of each of its streams (the imports check prints a line or
# two; a module that prints at import could print gigabytes before the check's line).
CHECK_OUTPUT_BYTES = 1 * MIB


class HeadTail:
    """The first three quarters of ``limit`` bytes of a stream as read, and a rolling tail of
    the last quarter; how many bytes fell between them."""

    def __init__(self, limit: int = CHECK_OUTPUT_BYTES) -> None:
        self.head = bytearray()
        self.head_max = limit - limit // 4
        self.tail: deque[bytes] = deque()
        self.tail_bytes = 0
        self.tail_max = limit // 4
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_bytes += len(data)
        while self.tail_bytes > self.tail_max:
            excess = self.tail_bytes - self.tail_max
            first = self.tail.popleft()
            if len(first) > excess:
                self.tail.appendleft(first[excess:])
            cut = min(len(first), excess)
            self.tail_bytes -= cut
            self.dropped += cut

    def text(self) -> str:
        """What was kept, with a line where bytes were left out."""
        gap = (f"\n[gpu-audit: {self.dropped} bytes of output left out here]\n"
               .encode() if self.dropped else b"")
        return (bytes(self.head) + gap + b"".join(self.tail)).decode("utf-8", "replace")


def run_capped(argv: list[str], *, timeout: float, limit: int = CHECK_OUTPUT_BYTES,
               **popen: object) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=...)`` with each stream
    kept within ``limit`` bytes (:class:`HeadTail`): the memory a helper run's output takes is
    bounded however much it prints. Raises :class:`subprocess.TimeoutExpired` after killing the
    process when it outlives ``timeout``."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, **popen)  # type: ignore[call-overload]
    kept = [HeadTail(limit), HeadTail(limit)]

    def drain(stream: BinaryIO, into: HeadTail) -> None:
        with stream:
            while chunk := stream.read1(1 << 16):
                into.feed(chunk)

    readers = [threading.Thread(target=drain, args=(stream, into), daemon=True)
               for stream, into in zip((proc.stdout, proc.stderr), kept, strict=True)]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    finally:
        for reader in readers:
            reader.join(timeout=5)
    return subprocess.CompletedProcess(argv, proc.returncode, kept[0].text(), kept[1].text())
