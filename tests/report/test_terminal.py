from __future__ import annotations

import io

from gpu_audit.report.terminal import TrimmedLines


def test_lines_lose_their_padding_but_not_their_inner_spaces():
    out = io.StringIO()
    stream = TrimmedLines(out)
    stream.write("a  b   \nc")
    stream.write("d   ")
    stream.flush()  # "cd   " has padding to lose once it ends: it waits
    assert out.getvalue() == "a  b\n"
    stream.write("e\n")
    assert out.getvalue() == "a  b\ncd   e\n"
    stream.write("tail")
    stream.flush()  # nothing to trim: written now
    assert out.getvalue() == "a  b\ncd   e\ntail"
    assert not stream.isatty()
