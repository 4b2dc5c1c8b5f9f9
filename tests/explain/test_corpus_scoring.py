"""The scorer of explain on a corpus of real logs (bench/explain_corpus.py), run here on a small
corpus built from the synthetic fixtures: it must count a right reading as right and report
every kind of wrong one."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEADER = "file\tclass\tsource_url\tnumbers\tlang\tnote\n"

# fixture, its class, the numbers a correct reading gives
LOGS = [
    ("dmesg_xid79_fallen_off_bus.log", "gpu-hardware", "xid=79;pci_bus_id=0000:3b:00"),
    ("a100_fragmented_oom_torch23.log", "cuda-oom", "requested_bytes=3221225472;gpu_index=0"),
    ("dmesg_oom_killer_kernel5.log", "host-oom", "pid=73312"),
    ("healthy_run_with_alarming_lines.log", "negative", ""),
]


def _load_scorer():
    spec = importlib.util.spec_from_file_location("explain_corpus",
                                                  REPO / "bench" / "explain_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["explain_corpus"] = module
    spec.loader.exec_module(module)
    return module


scorer = _load_scorer()


def make_corpus(root: Path, logs=LOGS) -> Path:
    rows = []
    for name, cls, numbers in logs:
        (root / cls).mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / name, root / cls / name)
        rows.append(f"{cls}/{name}\t{cls}\thttps://example.org/{name}\t{numbers}\ten\tfixture\n")
    (root / "index.tsv").write_text(HEADER + "".join(rows), encoding="utf-8")
    return root


def test_right_readings_pass(tmp_path, capsys):
    corpus = make_corpus(tmp_path)
    assert scorer.main([str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "root-class accuracy: 4/4 = 100.0%" in out
    assert "MISS" not in out and "NUMBERS" not in out


def test_a_wrong_class_is_a_miss_and_fails(tmp_path, capsys):
    logs = [*LOGS[:-1], ("dmesg_xid79_fallen_off_bus.log", "nccl", "")]
    corpus = make_corpus(tmp_path, logs)
    assert scorer.main([str(corpus), "--min-accuracy", "0.5"]) == 0  # 3 of 4 is above a half
    assert scorer.main([str(corpus)]) == 1
    out = capsys.readouterr().out
    assert "MISS nccl/dmesg_xid79_fallen_off_bus.log: expected nccl, found gpu-hardware" in out


def test_an_alarm_on_a_negative_fails_whatever_the_accuracy(tmp_path, capsys):
    logs = [*LOGS, ("dmesg_xid48_dbe_xid45.log", "negative", "")]
    corpus = make_corpus(tmp_path, logs)
    assert scorer.main([str(corpus), "--min-accuracy", "0.5"]) == 1
    report = scorer.Report([scorer.score(corpus, row) for row in scorer.read_index(corpus)])
    assert [o.row.file for o in report.false_alarms] == ["negative/dmesg_xid48_dbe_xid45.log"]


def test_a_number_read_wrong_fails(tmp_path, capsys):
    logs = [("dmesg_xid79_fallen_off_bus.log", "gpu-hardware", "xid=48"), *LOGS[1:]]
    assert scorer.main([str(make_corpus(tmp_path, logs))]) == 1
    assert "NUMBERS gpu-hardware/dmesg_xid79_fallen_off_bus.log: xid=48 (got 79)" in \
        capsys.readouterr().out


def test_a_corpus_smaller_than_asked_fails(tmp_path, capsys):
    corpus = make_corpus(tmp_path)
    assert scorer.main([str(corpus), "--min-logs", "5"]) == 1
    assert "SHORT 4 logs, fewer than 5" in capsys.readouterr().out


@pytest.mark.parametrize("index, message", [
    ("file\tclass\n", "header"),
    (HEADER + "cuda-oom/missing.log\tcuda-oom\thttps://x\t\ten\tn\n", "no log"),
    (HEADER + "a\tb\n", "2 fields"),
])
def test_a_bad_index_is_refused_with_exit_3(tmp_path, capsys, index, message):
    (tmp_path / "index.tsv").write_text(index, encoding="utf-8")
    assert scorer.main([str(tmp_path)]) == 3
    assert message in capsys.readouterr().err


EVIDENCE_HEADER = HEADER.rstrip("\n") + "\tevidence\n"


def make_evidence_corpus(root: Path, logs) -> Path:  # type: ignore[no-untyped-def]
    """A corpus whose index has the evidence column: (fixture, class, evidence) per log."""
    rows = []
    for name, cls, evidence in logs:
        (root / cls).mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / name, root / cls / name)
        rows.append(f"{cls}/{name}\t{cls}\thttps://example.org/{name}\t\ten\tfixture\t"
                    f"{evidence}\n")
    (root / "index.tsv").write_text(EVIDENCE_HEADER + "".join(rows), encoding="utf-8")
    return root


def test_the_evidence_column_gives_a_second_accuracy_over_logs_with_a_message(tmp_path, capsys):
    # a miss whose text holds no printed message (a healthy log filed as a cuda-oom told in
    # words) counts in the first figure only; negatives count in both
    logs = [("a100_fragmented_oom_torch23.log", "cuda-oom", "message"),
            ("dmesg_xid79_fallen_off_bus.log", "gpu-hardware", "message"),
            ("healthy_run_with_alarming_lines.log", "cuda-oom", "none"),
            ("torchrun_worker_sigkill.log", "negative", "")]
    assert scorer.main([str(make_evidence_corpus(tmp_path, logs)), "--min-accuracy", "0"]) == 1
    out = capsys.readouterr().out
    assert "root-class accuracy: 2/4 = 50.0%" in out
    assert "root-class accuracy, logs with a printed message: 2/3 = 66.7%" in out


def test_an_index_without_the_evidence_column_prints_one_accuracy(tmp_path, capsys):
    assert scorer.main([str(make_corpus(tmp_path))]) == 0
    assert "printed message" not in capsys.readouterr().out
    assert all(row.evidence is None for row in scorer.read_index(tmp_path))


@pytest.mark.parametrize("evidence", ["maybe", ""])
def test_a_failure_row_needs_message_or_none_as_its_evidence(tmp_path, capsys, evidence):
    make_evidence_corpus(tmp_path, [("a100_fragmented_oom_torch23.log", "cuda-oom", evidence)])
    assert scorer.main([str(tmp_path)]) == 3
    assert f"evidence {evidence!r} is not one of message, none" in capsys.readouterr().err


def test_the_source_line_is_removed_only_where_there_is_one(tmp_path):
    text = "torch.OutOfMemoryError: CUDA out of memory.\n"
    posted = tmp_path / "posted.log"
    posted.write_text("acme/trainer · issue #12 · closed\n" + text, encoding="utf-8")
    own = tmp_path / "own.log"
    own.write_text(text, encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert scorer.without_source_line(posted, scratch).read_text(encoding="utf-8") == text
    assert scorer.without_source_line(own, scratch) == own  # a user's own log: as it is


def test_scoring_without_source_lines(tmp_path, capsys):
    corpus = make_corpus(tmp_path)
    for log in corpus.glob("*/*.log"):
        log.write_bytes("example.org · web page\n".encode() + log.read_bytes())
    assert scorer.main([str(corpus), "--without-source-line"]) == 0
    assert "root-class accuracy: 4/4 = 100.0%" in capsys.readouterr().out
