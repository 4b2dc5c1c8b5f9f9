"""The memory test of ``gpu-audit diag``: patterns written over a buffer and read back.

Runs in the diag worker with torch (any device: a GPU's memory, or host memory in the test mode).
The buffer is 32-bit words, handled in chunks so that the comparison needs little memory beside
the buffer. Patterns, each written over the whole buffer before any of it is read back (so a cell
that a later write disturbs is caught):

- walking bits: each of the 32 single-bit words, then its complement;
- address in address: every word holds its own index, then the complement;
- random: words from a seeded generator (per chunk), regenerated to check.

A mismatch names the byte offset of the first bad word, the bits that differ (as byte offset +
bit in that byte, little-endian), the pattern and how many words were wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

CHUNK_WORDS = 16 * 1024 * 1024  # 64 MiB of int32 per comparison
MAX_REPORTED = 8


def _word(value: int) -> int:
    """An unsigned 32-bit value as the int32 torch stores."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def patterns(seed: int, quick: bool = False) -> list[tuple[str, str, int]]:
    """(name, kind, value) in the order they run; ``quick`` keeps one of each kind."""
    walking = [(f"walking-1 bit {b}", "fill", _word(1 << b)) for b in range(32)]
    walking += [(f"walking-0 bit {b}", "fill", _word(~(1 << b))) for b in range(32)]
    if quick:
        walking = [walking[0], walking[-1]]
    return [*walking, ("address", "address", 0), ("address-inverted", "address", -1),
            ("random", "random", seed)]


class MemoryTest:
    """One buffer of ``words`` int32 on ``device``; :meth:`run` answers the test's record."""

    def __init__(self, torch: Any, device: Any, words: int, *, seed: int = 1234,
                 chunk_words: int = CHUNK_WORDS,
                 plant: tuple[int, int] | None = None) -> None:
        self.torch = torch
        self.device = device
        self.words = words
        self.seed = seed
        self.chunk = max(1, min(chunk_words, words))
        self.plant = plant  # (byte offset, bit): flipped after the first pattern's writes
        self.buffer = torch.empty(words, dtype=torch.int32, device=device)

    def _chunks(self) -> Iterator[tuple[int, int]]:
        for start in range(0, self.words, self.chunk):
            yield start, min(self.words, start + self.chunk)

    def _expected(self, kind: str, value: int, start: int, stop: int) -> Any:
        torch = self.torch
        if kind == "fill":
            return torch.full((stop - start,), value, dtype=torch.int32, device=self.device)
        if kind == "address":
            index = torch.arange(start, stop, dtype=torch.int64, device=self.device)
            index = index.remainder(1 << 32).to(torch.int32) if stop > 1 << 31 else \
                index.to(torch.int32)
            return ~index if value == -1 else index
        generator = torch.Generator(device=self.device)
        generator.manual_seed(value * 1_000_003 + start)
        return torch.randint(-(1 << 31), 1 << 31, (stop - start,), dtype=torch.int32,
                             device=self.device, generator=generator)

    def _write(self, kind: str, value: int) -> None:
        if kind == "fill":
            self.buffer.fill_(value)
            return
        for start, stop in self._chunks():
            self.buffer[start:stop].copy_(self._expected(kind, value, start, stop))

    def _flip_planted(self) -> None:
        offset, bit = self.plant  # type: ignore[misc]
        word, shift = offset // 4, (offset % 4) * 8 + bit
        mask = _word(1 << shift)
        self.buffer[word] = self.buffer[word] ^ mask

    def _verify(self, name: str, kind: str, value: int) -> dict[str, Any] | None:
        torch = self.torch
        bad_words = 0
        first: dict[str, Any] | None = None
        for start, stop in self._chunks():
            got = self.buffer[start:stop]
            # A fill pattern compares with its value: no expected chunk to build.
            expected = value if kind == "fill" else self._expected(kind, value, start, stop)
            wrong = got != expected
            count = int(wrong.sum().item())
            if not count:
                continue
            if kind == "fill":
                expected = self._expected(kind, value, start, stop)
            bad_words += count
            if first is None:
                where = torch.nonzero(wrong)[:MAX_REPORTED].flatten().tolist()
                errors = []
                for i in where:
                    diff = (int(got[i].item()) ^ int(expected[i].item())) & 0xFFFFFFFF
                    bits = [b for b in range(32) if diff >> b & 1]
                    errors.append({
                        "offset_bytes": (start + i) * 4 + bits[0] // 8,
                        "bit": bits[0] % 8,
                        "word_offset_bytes": (start + i) * 4,
                        "bits_in_word": bits,
                        "expected": f"0x{int(expected[i].item()) & 0xFFFFFFFF:08x}",
                        "read": f"0x{int(got[i].item()) & 0xFFFFFFFF:08x}",
                    })
                first = {"pattern": name, "errors": errors}
        if first is None:
            return None
        first["bad_words"] = bad_words
        return first

    def run(self, quick: bool = False,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Every pattern; the record: bytes tested, patterns run, seconds, the mismatches."""
        started = time.perf_counter()
        mismatches: list[dict[str, Any]] = []
        ran = []
        planted = self.plant is None
        for name, kind, value in patterns(self.seed, quick=quick):
            if progress is not None:
                progress(name)
            self._write(kind, value)
            if not planted:
                self._flip_planted()
                planted = True
            found = self._verify(name, kind, value)
            ran.append(name)
            if found is not None:
                mismatches.append(found)
        self._sync()
        return {"bytes": self.words * 4, "patterns": len(ran), "seed": self.seed,
                "seconds": round(time.perf_counter() - started, 3),
                "mismatches": mismatches, "planted": list(self.plant) if self.plant else None}

    def _sync(self) -> None:
        if getattr(self.device, "type", "cpu") == "cuda":
            self.torch.cuda.synchronize(self.device)

    def close(self) -> None:
        del self.buffer
