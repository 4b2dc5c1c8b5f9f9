"""``gpu-audit explain`` on generated logs: lines of real failure logs cut, shuffled, spliced
with hostile text and numbers, compressed or not. Every log is classified (exit 0 or 1) or
refused with exit 3 (unreadable input); none crashes."""

from __future__ import annotations

import gzip
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.support import FUZZ, run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "explain" / "fixtures"
REAL_LINES = sorted({line for path in sorted(FIXTURES.glob("*.log"))
                     for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
                     if line.strip()})

numbers = st.one_of(st.integers(min_value=-(2**80), max_value=2**80).map(str),
                    st.sampled_from(["nan", "inf", "1e999", "9" * 5000, "١٢٨", "0x", "-0"]))


@st.composite
def log_lines(draw) -> str:
    line = draw(st.sampled_from(REAL_LINES))
    action = draw(st.sampled_from(["keep", "keep", "cut", "numbers", "splice"]))
    if action == "cut":
        start = draw(st.integers(min_value=0, max_value=len(line)))
        return line[start:]
    if action == "numbers":
        words = line.split(" ")
        for index, word in enumerate(words):
            if any(ch.isdigit() for ch in word) and draw(st.booleans()):
                words[index] = draw(numbers)
        return " ".join(words)
    if action == "splice":
        at = draw(st.integers(min_value=0, max_value=len(line)))
        return line[:at] + draw(st.text(max_size=30)) + line[at:]
    return line


logs = st.lists(st.one_of(log_lines(), st.text(max_size=60)), max_size=25).map("\n".join)


@FUZZ
@given(text=logs, compress=st.booleans(), as_json=st.booleans())
def test_any_log(text, compress, as_json, tmp_path_factory):
    folder = tmp_path_factory.mktemp("log")
    raw = text.encode("utf-8", errors="surrogateescape")
    path = folder / ("job.log.gz" if compress else "job.log")
    path.write_bytes(gzip.compress(raw) if compress else raw)
    run_cli(["explain", str(path), *(["--json"] if as_json else [])], allowed=(0, 1, 3))
