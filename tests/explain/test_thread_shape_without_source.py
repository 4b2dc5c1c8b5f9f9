"""A thread copied without the line saying where it is from: its own shape (a title, then each
post under a line naming its writer and date) says it reports a problem, as an issue's source
line does; a thread titled as a change, or with a review's post, stays a change."""

from __future__ import annotations

from pathlib import Path

from gpu_audit.explain.documents import read_head
from tests.explain.helpers import SHAPES, shape_incidents, shape_root, text_incidents


def shape_path(name: str) -> Path:
    return SHAPES / name

_THREAD = ("# Loader stalls after the first epoch\n\nalice-ml · description · 2025-01-05\n"
           "The loader stops.\n\nbob-dev · comment · 2025-01-06\nWhich version?\n")


def test_posts_under_writer_lines_make_an_issue_thread() -> None:
    assert read_head(_THREAD.encode(), True).issue_thread
    # (a plain log, or a page without such post lines, is no thread)
    assert not read_head(b"# Loader stalls\n\nThe loader stops.\n", True).issue_thread


def test_a_change_titled_or_reviewed_thread_is_a_change() -> None:
    body = _THREAD.split("\n", 1)[1]
    for title in ("# Fix the loader stall after the first epoch", "# Fix(loader): stall",
                  "# [Bugfix] Use the host loader when the GPU queue stalls"):
        head = read_head(f"{title}\n{body}".encode(), True)
        assert head.change_thread and not head.issue_thread, title
    reviewed = _THREAD + "\ncarol-dev · review · 2025-01-07\nApproved.\n"
    head = read_head(reviewed.encode(), True)
    assert head.change_thread and not head.issue_thread
    # (a title that starts with such a word but tells a failure is a report's)
    failed = read_head(f"# Check failed: stream is not ready\n{body}".encode(), True)
    assert failed.issue_thread and not failed.change_thread


def test_source_line_still_decides_where_present() -> None:
    pulled = "example/trainer · pull request #7 · merged\n" + _THREAD
    head = read_head(pulled.encode(), True)
    assert head.change_thread and not head.issue_thread


def test_reply_explaining_the_message_leaves_the_report_its_failure() -> None:
    root = shape_root("thread_shape_reply_explains_oom.log")
    assert root.cls == "cuda-oom"


def test_title_names_the_failure_of_a_thread_without_words_of_its_writer() -> None:
    assert shape_root("thread_shape_title_ram_crash.log").cls == "host-oom"


def test_change_titled_thread_quoting_the_message_raises_nothing() -> None:
    found = shape_incidents("thread_shape_change_title_oom.log")
    assert not any(i.role == "root-cause" for i in found)


def test_numbered_turns_with_their_writer_make_an_issue_thread(tmp_path: Path) -> None:
    turns = (shape_path("thread_shape_reply_explains_oom.log").read_text(encoding="utf-8")
             .replace("kestrel-ml · description · 2025-03-02", "[turn 0 by kestrel-ml, continued]")
             .replace("maintainer-b · comment · 2025-03-03", "[turn 1 by maintainer-b]"))
    assert read_head(turns.encode(), True).issue_thread
    found = text_incidents(tmp_path, turns)
    assert [i.cls for i in found if i.role == "root-cause"] == ["cuda-oom"]
