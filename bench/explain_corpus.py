"""Score ``gpu-audit explain`` on a corpus of real logs: per-class precision and recall, the
root-class accuracy, every miss, every false alarm and every number read wrong.

A corpus is a folder of logs, one per file under ``<class>/`` (``negative/`` for logs with no
GPU failure), and an ``index.tsv`` with the header ``file class source_url numbers lang note``:
the log's path in the folder, the root class a correct reading gives, where the log was posted,
the numbers a correct reading extracts (``key=value;...`` with the keys of the root incident's
``numbers``, plus ``rank=N`` for a rank among its ``ranks``), the languages in it (``en``,
``zh+en``, ...) and a note.

An index may add a seventh column, ``evidence``, saying what the stored text holds of the
failure: ``message`` when it holds a message the failing program or system printed (a line
quoted inline in a sentence or a title counts), ``none`` when the failure is only told in a
person's own words or named in the title, with no printed message. The convention: the value
describes the stored text, not the thread it was taken from; a negative's value may be left
empty (a negative counts in every figure whatever it says). Indexes without the column still
load. When any row has the column, the root-class accuracy is printed twice: over all logs, and
over the logs whose evidence is ``message`` (negatives always included).

Logs people posted in public threads are their authors' text, so no corpus ships with
gpu-audit: keep one beside your checkout and point this at it. The manifests of the corpora
the figures in bench/RESULTS.md were taken on (sources, classes, numbers, no log text) are in
bench/explain-corpus/.

    python bench/explain_corpus.py CORPUS [--min-accuracy 0.97] [--min-logs N] [--min-per-class N]
                                          [--min-negatives N] [--min-not-english N]
                                          [--without-source-line]

A collected text opens with a line saying where it was posted (``owner/repo · issue #12 ·
closed``, ``example.org · web page``), which a user's own log never has, and explain reads it (an
issue's replies report, a copied web page illustrates). ``--without-source-line`` scores each
text with that first line removed: the figure for logs as users have them.

Exit status: 0 when the accuracy is at least --min-accuracy, no negative raised an alarm, every
number was read and the corpus is as large as asked; 1 when not; 3 when the corpus cannot be
read.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

HEADER = ("file", "class", "source_url", "numbers", "lang", "note")
EVIDENCE = "evidence"  # the optional seventh column
EVIDENCE_VALUES = ("message", "none")
NEGATIVE = "negative"
TORCH_VERSION = "2.3.1"  # remedies do not count here; a fixed version keeps runs identical


class CorpusError(Exception):
    """The corpus folder or its index cannot be read as a corpus."""


@dataclass(frozen=True)
class Row:
    file: str
    cls: str
    source_url: str
    numbers: str
    lang: str
    note: str
    # "message" or "none"; "" for a negative left empty; None when the index has no such column
    evidence: str | None = None

    @property
    def has_message(self) -> bool:
        """Does the row count in the accuracy over logs with a printed message?"""
        return self.cls == NEGATIVE or self.evidence == "message"

    def expected_numbers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in self.numbers.split(";"))):
            key, _, value = item.partition("=")
            out[key.strip()] = value.strip()
        return out


def read_index(corpus: Path) -> list[Row]:
    """The rows of ``corpus/index.tsv``; a missing log, a duplicate or a bad row is an error."""
    index = corpus / "index.tsv"
    try:
        lines = index.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read {index}: {exc}") from exc
    header = tuple(lines[0].split("\t")) if lines else ()
    if header not in (HEADER, (*HEADER, EVIDENCE)):
        raise CorpusError(f"{index}: the first line must be the header {' '.join(HEADER)} "
                          f"(and optionally {EVIDENCE})")
    rows, seen = [], set()
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise CorpusError(f"{index}:{number}: {len(fields)} fields, not {len(header)}")
        row = Row(*fields)
        if len(header) > len(HEADER) and row.evidence not in EVIDENCE_VALUES and not (
                row.cls == NEGATIVE and not row.evidence):
            raise CorpusError(f"{index}:{number}: evidence {row.evidence!r} is not one of "
                              f"{', '.join(EVIDENCE_VALUES)}")
        if row.file in seen:
            raise CorpusError(f"{index}:{number}: {row.file} is listed twice")
        if not (corpus / row.file).is_file():
            raise CorpusError(f"{index}:{number}: no log {corpus / row.file}")
        seen.add(row.file)
        rows.append(row)
    return rows


@dataclass
class Outcome:
    row: Row
    found: str  # the root class found, or "negative"
    wrong_numbers: list[str] = field(default_factory=list)
    root: Any = None  # the root-cause incident, if any

    @property
    def right(self) -> bool:
        return self.found == self.row.cls


def _same(expected: str, got: Any) -> bool:
    if got is None:
        return False
    if isinstance(got, bool):
        return str(got).lower() == expected.lower()
    if isinstance(got, int | float):
        try:
            return abs(float(expected) - got) < 1e-9
        except ValueError:
            return False
    if isinstance(got, list):
        return expected in {str(v) for v in got}
    return str(got).strip().lower() == expected.strip().lower()


# The collectors' first line: where the text was posted, its parts joined by " · ".
SOURCE_LINE = re.compile(rb"[^\s\xc2]+ \xc2\xb7 [^\n]*\n")


def without_source_line(path: Path, scratch: Path) -> Path:
    """The log as a user would have it: a copy without the collector's first line, if any."""
    data = path.read_bytes()
    match = SOURCE_LINE.match(data)
    if match is None:
        return path
    copy = scratch / path.name
    copy.write_bytes(data[match.end():])
    return copy


def score(corpus: Path, row: Row, scratch: Path | None = None) -> Outcome:
    """Explain one log and compare the root cause and its numbers with the index; with a
    ``scratch`` folder, the log without its source line."""
    from gpu_audit.explain import explain_sources

    path = corpus / row.file
    if scratch is not None:
        path = without_source_line(path, scratch)
    result = explain_sources([str(path)], torch_version=TORCH_VERSION, workers=1)
    root = next((i for i in result.incidents if i.role == "root-cause"), None)
    outcome = Outcome(row, root.cls if root else NEGATIVE, root=root)
    if root is None or not outcome.right:
        return outcome
    for key, value in row.expected_numbers().items():
        if key == "rank":
            if not value.isdigit() or int(value) not in root.ranks:
                outcome.wrong_numbers.append(f"rank={value} (ranks {root.ranks})")
        elif not _same(value, root.numbers.get(key)):
            outcome.wrong_numbers.append(f"{key}={value} (got {root.numbers.get(key)!r})")
    return outcome


@dataclass
class Report:
    outcomes: list[Outcome]
    with_evidence: bool = False  # the index has the evidence column

    @property
    def accuracy(self) -> float:
        return sum(o.right for o in self.outcomes) / max(1, len(self.outcomes))

    @property
    def with_message(self) -> list[Outcome]:
        """The logs whose stored text holds a printed message, and every negative."""
        return [o for o in self.outcomes if o.row.has_message]

    @property
    def false_alarms(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.row.cls == NEGATIVE and o.found != NEGATIVE]

    @property
    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.right]

    @property
    def wrong_numbers(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.wrong_numbers]

    @property
    def unlocated(self) -> list[Outcome]:
        """Root causes without their lines, an excerpt or a remedy."""
        return [o for o in self.outcomes if o.root is not None and (
            not o.root.line_numbers or not o.root.excerpt.strip() or not o.root.remedy.strip())]

    def per_class(self) -> list[tuple[str, int, float, float]]:
        """(class, logs, precision, recall) for every expected or found class."""
        classes = sorted({o.row.cls for o in self.outcomes} | {o.found for o in self.outcomes})
        table = []
        for cls in classes:
            expected = [o for o in self.outcomes if o.row.cls == cls]
            found = [o for o in self.outcomes if o.found == cls]
            hits = sum(1 for o in expected if o.right)
            table.append((cls, len(expected), hits / len(found) if found else 1.0,
                          hits / len(expected) if expected else 1.0))
        return table

    def text(self) -> str:
        lines = [f"{'class':<24}{'logs':>6}{'precision':>11}{'recall':>8}"]
        for cls, logs, precision, recall in self.per_class():
            lines.append(f"{cls:<24}{logs:>6}{precision:>10.1%}{recall:>8.1%}")
        right = sum(o.right for o in self.outcomes)
        lines.append(f"root-class accuracy: {right}/{len(self.outcomes)} = {self.accuracy:.1%}")
        if self.with_evidence:
            kept = self.with_message
            hits = sum(o.right for o in kept)
            lines.append(f"root-class accuracy, logs with a printed message: {hits}/{len(kept)}"
                         f" = {hits / max(1, len(kept)):.1%}")
        lines += [f"  MISS {o.row.file}: expected {o.row.cls}, found {o.found}"
                  for o in self.misses]
        lines += [f"  NUMBERS {o.row.file}: {'; '.join(o.wrong_numbers)}"
                  for o in self.wrong_numbers]
        lines += [f"  UNLOCATED {o.row.file}" for o in self.unlocated]
        return "\n".join(lines)


def corpus_counts(rows: list[Row]) -> dict[str, Any]:
    by_class = Counter(row.cls for row in rows)
    return {"logs": len(rows), "by_class": dict(sorted(by_class.items())),
            "negatives": by_class.get(NEGATIVE, 0),
            "not_english": sum(1 for row in rows if row.lang.strip().lower() != "en")}


def shortfalls(counts: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """What the corpus lacks against the sizes asked for."""
    from gpu_audit.explain import CLASSES

    short = []
    if counts["logs"] < args.min_logs:
        short.append(f"{counts['logs']} logs, fewer than {args.min_logs}")
    short += [f"{cls}: {counts['by_class'].get(cls, 0)} logs, fewer than {args.min_per_class}"
              for cls in CLASSES if counts["by_class"].get(cls, 0) < args.min_per_class]
    if counts["negatives"] < args.min_negatives:
        short.append(f"{counts['negatives']} negatives, fewer than {args.min_negatives}")
    if counts["not_english"] < args.min_not_english:
        short.append(f"{counts['not_english']} logs not in English, fewer than "
                     f"{args.min_not_english}")
    return short


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--min-accuracy", type=float, default=0.97)
    parser.add_argument("--min-logs", type=int, default=0)
    parser.add_argument("--min-per-class", type=int, default=0)
    parser.add_argument("--min-negatives", type=int, default=0)
    parser.add_argument("--min-not-english", type=int, default=0)
    parser.add_argument("--without-source-line", action="store_true",
                        help="score each text without the collector's first line")
    args = parser.parse_args(argv)
    try:
        rows = read_index(args.corpus)
    except CorpusError as exc:
        print(f"explain_corpus: {exc}", file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory(prefix="explain-corpus-") as scratch:
        folder = Path(scratch) if args.without_source_line else None
        report = Report([score(args.corpus, row, folder) for row in rows],
                        with_evidence=any(row.evidence is not None for row in rows))
    counts = corpus_counts(rows)
    print(report.text())
    print(f"corpus: {counts}")
    short = shortfalls(counts, args)
    for line in short:
        print(f"  SHORT {line}")
    failed = (report.accuracy < args.min_accuracy or report.false_alarms or report.wrong_numbers
              or report.unlocated or short)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
