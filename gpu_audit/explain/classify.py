"""From candidate lines to incidents: match, deduplicate, attach continuations, order by cause.

A candidate is first read joined with the lines it wraps onto (:mod:`.joining`); a joined
message is one occurrence spanning its lines, which are not read again. A message that is only
quoted (documentation, an error catalogue) opens no incident, and one the program says it
caught becomes a warning (:mod:`.mentions`).

Memory stays bounded whatever the log's size: an incident keeps its first, most detailed and
latest occurrence, at most :data:`MAX_LOCATIONS` locations and :data:`MAX_RANKS` ranks, and
counts the rest; a signature whose incidents are kept apart by a number (an Xid, a PCI address,
a status) keeps at most :data:`MAX_KEYED` of them apart, and counts the lines with any further
value in one more incident. Every step for one line costs the same however many came before.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from gpu_audit.bounds import LARGEST_INT, LOWEST_INT, MAX_PROCESSES
from gpu_audit.explain.documents import (
    OWN_RUN,
    Head,
    read_head,
    title_failure,
    title_numbers,
)
from gpu_audit.explain.joining import join
from gpu_audit.explain.mentions import (
    EXPLAINER_MIN_CUES,
    explainer_cues,
    handled_in,
    is_catalogue,
    is_mention,
)
from gpu_audit.explain.scanner import Candidate
from gpu_audit.explain.signatures import SIGNATURE_BY_ID, SIGNATURES, AdviceContext, Signature
from gpu_audit.explain.signatures.cuda_oom import (
    BARE,
    MASKED_OOM_REMEDY,
    TOLD,
    masked_oom_explanation,
    onnxruntime_arena,
)
from gpu_audit.model import Severity
from gpu_audit.redact import redact_text

MAX_LOCATIONS = 50
MAX_RANKS = 1024
MAX_SOURCES = 64
# Incidents of one signature kept apart by the value of its key field: far more Xids, GPUs'
# PCI addresses or library statuses than any real log holds.
MAX_KEYED = 256
EXCERPT_CHARS = 300
MAX_FACT_ITEMS = MAX_PROCESSES  # rows of a listed fact (nvidia-smi's process table) kept
_RECENT_PER_CLASS = 16
# A message this many lines below an exception's type printed alone (PaddlePaddle's
# "ResourceExhaustedError:", a blank line, then "Out of memory error on GPU 0 ...") is that
# type's message.
_BARE_HEAD_REACH = 4
# A line's words are read in its first this many characters: phrases that tell an explainer or
# the writer's own run open their sentence, and fifty patterns over a hostile 8 KiB line each
# would cost more than everything else explain does with it.
_CUE_CHARS = 2048
_WORDS_MEMO = 4096  # context lines whose explainer and first-person words are remembered

# Rank prefixes written by torchrun/torchelastic, PyTorch's own logging and vLLM workers.
_RANK = re.compile(
    r"\[(?:rank|Rank|RANK)[ :=]?(\d+)\]|\[PG (?:ID \d+ PG GUID \S+ )?Rank (\d+)\]|"
    r"\brank=(\d+)\b|^\[default(\d+)\]:|"
    r"^\[\d{1,9},(\d{1,6})\]<std(?:out|err)>:"  # Open MPI's --tag-output: [job,rank]<stream>:
)


@dataclass(frozen=True)
class Location:
    source: str
    line: int
    end_line: int | None = None  # the last line of a message wrapped over several lines


@dataclass(frozen=True)
class Incident:
    """One failure found in the log(s): a class, what it means, what to do, where it was seen."""

    cls: str  # one of signatures.CLASSES; "class" in JSON
    signature: str  # the message shape that matched, e.g. "cuda-oom/caching-allocator"
    title: str
    severity: Severity
    role: str  # root-cause | consequence | related | context
    explanation: str
    remedy: str
    line_numbers: list[int]  # the first MAX_LOCATIONS occurrences, in reading order
    excerpt: str
    numbers: dict[str, Any]
    count: int  # occurrences (continuation lines are not counted)
    diagnosis: str | None = None
    locations: list[Location] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    tier: float = 1.0

    @property
    def is_failure(self) -> bool:
        return self.severity >= Severity.ERROR


@dataclass
class _Occurrence:
    source_index: int
    line: int
    end_line: int
    text: str
    match_start: int
    numbers: dict[str, Any]
    rank: int | None
    signature: Signature
    handled: bool = False  # the program caught it and went on
    heading: bool = False  # a markdown heading that is only the message ("# CUDNN_STATUS_X")

    @property
    def detail(self) -> int:
        return sum(1 for value in self.numbers.values() if value is not None)


@dataclass
class _Group:
    key: tuple[Any, ...]
    order: tuple[int, int]  # (source index, line) of the first occurrence
    first: _Occurrence
    primary: _Occurrence
    latest: _Occurrence
    count: int = 0
    locations: list[tuple[int, int, int]] = field(default_factory=list)
    extra_locations: int = 0
    ranks: set[int] = field(default_factory=set)
    source_indexes: set[int] = field(default_factory=set)
    handled: int = 0  # occurrences the program caught and went on from
    in_body: bool = False  # an occurrence outside a heading that is only the message

    def note(self, occ: _Occurrence) -> None:
        if not occ.heading:
            self.in_body = True
        if len(self.locations) < MAX_LOCATIONS:
            self.locations.append((occ.source_index, occ.line, occ.end_line))
        else:
            self.extra_locations += 1
        if occ.rank is not None and len(self.ranks) < MAX_RANKS:
            self.ranks.add(occ.rank)
        if len(self.source_indexes) < MAX_SOURCES:
            self.source_indexes.add(occ.source_index)

    def refresh_primary(self, occ: _Occurrence) -> None:
        if occ is not self.primary and occ.detail > self.primary.detail:
            self.primary = occ


def _rank(text: str) -> int | None:
    match = _RANK.search(text)
    if match is None:
        return None
    return int(next(group for group in match.groups() if group is not None))


_FACT_SIGNATURES = tuple(sig for sig in SIGNATURES if sig.fact)
_GRAM = 3


def _needle_index() -> tuple[dict[str, tuple[str, ...]], tuple[str, ...],
                             dict[str, tuple[int, ...]]]:
    """Needles by their first three characters, the shorter needles, and the signatures (by
    position in SIGNATURES) each needle belongs to.

    A needle in a text starts at one of the text's three-character slices, so only the needles
    filed under those slices are looked for. Every line of a log full of matches comes here:
    testing each of the ~900 needles, then each signature, cost twice as much per line.
    """
    by_gram: dict[str, list[str]] = {}
    signatures: dict[str, list[int]] = {}
    for index, sig in enumerate(SIGNATURES):
        for needle in sig.needles:
            signatures.setdefault(needle, []).append(index)
    for needle in sorted(signatures):
        if len(needle) >= _GRAM:
            by_gram.setdefault(needle[:_GRAM], []).append(needle)
    short = tuple(needle for needle in sorted(signatures) if len(needle) < _GRAM)
    return ({gram: tuple(needles) for gram, needles in by_gram.items()}, short,
            {needle: tuple(indexes) for needle, indexes in signatures.items()})


_NEEDLES_BY_GRAM, _SHORT_NEEDLES, _NEEDLE_SIGNATURES = _needle_index()


def _present_needles(text: str) -> set[str]:
    """The needles that occur in ``text``."""
    present = {needle for needle in _SHORT_NEEDLES if needle in text}
    grams = {text[i:i + _GRAM] for i in range(len(text) - _GRAM + 1)}
    for gram in grams.intersection(_NEEDLES_BY_GRAM):
        present.update(needle for needle in _NEEDLES_BY_GRAM[gram] if needle in text)
    return present


def match_signature(text: str) -> tuple[Signature, re.Match[str]] | None:
    """The first signature (in SIGNATURES' order) whose needle and regex match ``text``."""
    present = _present_needles(text)
    indexes = {index for needle in present for index in _NEEDLE_SIGNATURES[needle]}
    for index in sorted(indexes):
        sig = SIGNATURES[index]
        match = sig.regex.search(text)
        if match is not None:
            return sig, match
    return None


class Classifier:
    """Accumulates candidates from one or more sources; :meth:`incidents` orders them."""

    def __init__(self, torch_version: str | None = None) -> None:
        self._ctx = AdviceContext(torch_version)
        self._groups: dict[tuple[Any, ...], _Group] = {}
        self._keyed: dict[tuple[Any, ...], int] = {}  # incidents kept apart, per signature
        self._recent: dict[str, deque[tuple[_Group, _Occurrence]]] = {}
        self._read_to: dict[int, int] = {}  # per source: the last line a joined match used
        self._facts: dict[str, Any] = {}
        self._fact_items: dict[str, set[str]] = {}  # the list items kept, to keep each once
        self._catalogues: set[int] = set()  # sources that are error catalogues, not logs
        self._cues: dict[int, set[str]] = {}  # per source: the explainer phrases seen
        self._cue_lines: dict[int, int] = {}  # per source: the last line read for them
        # per source: the last line seen (a log's last lines are always candidates, so this is
        # where it ends)
        self._last_line: dict[int, int] = {}
        self._own_run: set[int] = set()  # sources whose text says the writer met a failure
        self._heads: dict[int, Head] = {}  # per source: what its first lines say
        self._words: dict[str, tuple[frozenset[str], bool]] = {}  # see _line_words
        self.sources: list[str] = []

    def add_source(self, name: str) -> int:
        self.sources.append(name)
        return len(self.sources) - 1

    def note_head(self, source_index: int, data: bytes, whole: bool) -> None:
        """Read a source's first bytes (``whole``: all of it): its title, whether it is a pull
        request, and the explainer phrases and first-person words there."""
        head = read_head(data, whole)
        self._heads[source_index] = head
        lines = head.lines
        if head.change_thread:
            lines = [line for line in lines if not _CHANGE_SECTION.match(line)]
        self._cues.setdefault(source_index, set()).update(explainer_cues(lines))
        if head.own_run:
            self._own_run.add(source_index)
        self._head_facts(head)

    def _head_facts(self, head: Head) -> None:
        """The facts a text states in its first lines (its title, its opening), also on lines
        the prefilter passes over: an application's option for the allocator backend named in
        a title ("--disable-cuda-malloc") is no message, and carries no key."""
        for line in head.lines:
            for sig in _FACT_SIGNATURES:
                match = sig.regex.search(line)
                if match is None or sig.extract is None:
                    continue
                try:
                    self._note_facts(in_range(sig.extract(match, line)))
                except (ValueError, OverflowError):  # a number of thousands of digits
                    continue

    def feed(self, source_index: int, candidate: Candidate) -> None:
        if candidate.line > self._last_line.get(source_index, 0):
            self._last_line[source_index] = candidate.line
        read_to = self._read_to.get(source_index, 0)
        if candidate.line <= read_to:
            return  # already read as part of a joined message
        if source_index not in self._catalogues and is_catalogue(candidate.text):
            self._catalogues.add(source_index)
        found, text, first, last = self._match(candidate, read_to)
        if found is None:
            return
        if last > candidate.line:
            self._read_to[source_index] = last
        sig, match = found
        self._read_cues(source_index, candidate)
        head = self._heads.get(source_index)
        change = head is not None and (head.pull_request or head.change_thread)
        issue = head is not None and head.issue_thread
        if is_mention(candidate, text, match, change, issue):
            return
        try:
            numbers = in_range(sig.extract(match, text)) if sig.extract else {}
        except (ValueError, OverflowError):  # a number of thousands of digits: none read
            numbers = {}
        if sig.fact:
            self._note_facts(numbers)
            return
        if sig.handles:
            self._handle(source_index, sig, first)
            return
        if (not sig.reads_titles and head is not None and head.heading
                and first == head.title_line):
            return  # the title's reading (_titles) judges it
        if sig.needs_gpu_subject and (head is None or not head.gpu_subject):
            return  # whose memory, the text does not say
        # (the rank a message names in its own words, "communicator was aborted on rank 1",
        # where no launcher's prefix gives it)
        rank = _rank(text)
        if rank is None and isinstance(numbers.get("rank"), int):
            rank = numbers["rank"]
        occ = _Occurrence(source_index, first, last, text, match.start(), numbers, rank,
                          sig, heading=_heading_only(text, match))
        if sig.attach and self._attach(occ):
            return
        if sig.attach in ("only", "latest"):
            return
        key = _group_key(sig, numbers)
        self._drop_bare_head(occ, key)
        group = self._groups.get(key)
        if group is None:
            key = self._bounded(key)
            group = self._groups.get(key)
        if group is None:
            group = _Group(key, (source_index, candidate.line), occ, occ, occ)
            self._groups[key] = group
        group.count += 1
        group.latest = occ
        group.note(occ)
        group.refresh_primary(occ)
        if handled_in(sig.cls, text, match.end(), candidate):
            group.handled += 1
            occ.handled = True
        self._recent.setdefault(sig.cls, deque(maxlen=_RECENT_PER_CLASS)).append((group, occ))

    def _read_cues(self, source_index: int, candidate: Candidate) -> None:
        """Note the explainer phrases around a match (each line read once per source, and no
        more once the source is known to be an explainer)."""
        cues = self._cues.setdefault(source_index, set())
        if len(cues) >= EXPLAINER_MIN_CUES:
            return
        done = self._cue_lines.get(source_index, 0)
        lines = [(candidate.line - back, text) for back, text in candidate.before]
        lines += [(candidate.line, candidate.text)]
        lines += [(candidate.line + ahead, text) for ahead, text in candidate.after]
        self._cue_lines[source_index] = max(done, candidate.line + len(candidate.after))
        head = self._heads.get(source_index)
        change = head is not None and head.change_thread
        for number, text in lines:
            if number <= done or (change and _CHANGE_SECTION.match(text)):
                continue
            found, own = self._line_words(text)
            cues |= found
            if own:
                self._own_run.add(source_index)

    def _line_words(self, text: str) -> tuple[frozenset[str], bool]:
        """(the explainer phrases, whether the writer says they met a failure) in one line;
        remembered, because a log repeats its lines (a flood of one message costs one read)."""
        known = self._words.get(text)
        if known is None:
            if len(self._words) >= _WORDS_MEMO:
                self._words.clear()
            head = text[:_CUE_CHARS]
            known = (frozenset(explainer_cues([head])), bool(OWN_RUN.search(head)))
            self._words[text] = known
        return known

    def _explainers(self) -> set[int]:
        """Sources that quote failures: pull requests; requests about a message's wording, and
        texts with explainer phrases of one kind, where nothing says the writer met the failure;
        texts with explainer phrases of several kinds."""
        # (a request about a message's wording that pastes the writer's own run reports it; a
        # pull request that changes a message pastes what the program will print)
        quoting = {i for i, head in self._heads.items() if head.pull_request or (
            head.about_message and head.change_thread) or (
            head.about_message and not head.fenced and i not in self._own_run)}
        issues = {i for i, head in self._heads.items() if head.issue_thread}
        # (a web page that shows a log without a word of the writer's own run illustrates)
        quoting |= {i for i, head in self._heads.items()
                    if head.web_page and not head.own_run and i not in self._own_run}
        # (a reply that reads the writer's paste explains the writer's run; so do a
        # maintainer's explaining replies in an issue whose first post says its writer met the
        # failure)
        reading = {i for i, head in self._heads.items()
                   if head.reads_paste or (head.issue_thread and head.own_run)}
        for i, cues in self._cues.items():
            if i in reading:
                continue
            if len(cues) >= EXPLAINER_MIN_CUES or (cues and i not in self._own_run | issues):
                quoting.add(i)
        return quoting

    def _note_facts(self, numbers: dict[str, Any]) -> None:
        """Keep what a fact line states; lists (processes a table names) accumulate, bounded,
        each item once (a table printed twice names its processes once)."""
        for key, value in numbers.items():
            if isinstance(value, list):
                kept = self._facts.setdefault(key, [])
                seen = self._fact_items.setdefault(key, set())
                for item in value:
                    frozen = repr(sorted(item.items())) if isinstance(item, dict) else repr(item)
                    if frozen not in seen and len(kept) < MAX_FACT_ITEMS:
                        seen.add(frozen)
                        kept.append(item)
            elif value is not None:
                self._facts[key] = value

    def _bounded(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """The key of a new incident, or of the one that counts together the values of a key
        field past the first MAX_KEYED (hostile or garbled logs: thousands of "Xids")."""
        if len(key) < 3:
            return key  # not kept apart by a value
        family = key[:-1]
        seen = self._keyed.get(family, 0)
        if seen >= MAX_KEYED:
            return (*family, _MORE)
        self._keyed[family] = seen + 1
        return key

    @staticmethod
    def _match(candidate: Candidate, read_to: int
               ) -> tuple[tuple[Signature, re.Match[str]] | None, str, int, int]:
        """The signature that reads the candidate: on its line joined with the lines around
        it when that match covers the line itself, else on the line alone."""
        joined = join(candidate, read_to)
        if joined is not None:
            found = match_signature(joined.text)
            if found is not None:
                lines = joined.lines_of(found[1].start(), found[1].end())
                if lines is not None:
                    return found, joined.text, lines[0], lines[1]
        return match_signature(candidate.text), candidate.text, candidate.line, candidate.line

    def _handle(self, source_index: int, sig: Signature, line: int) -> None:
        """A line saying that a recent failure of class ``sig.handles`` was caught."""
        for group, target in reversed(self._recent.get(str(sig.handles), ())):
            if target.source_index != source_index or not 0 <= line - target.line <= sig.window:
                continue
            if not target.handled:
                target.handled = True
                group.handled += 1
            return

    def _recent_for(self, sig: Signature) -> list[tuple[_Group, _Occurrence]]:
        """The recent occurrences a continuation line may attach to, latest first: its own
        class's, or (``attach="latest"``) every class's."""
        if sig.attach != "latest":
            return list(reversed(self._recent.get(sig.cls, ())))
        found = [pair for pairs in self._recent.values() for pair in pairs]
        return sorted(found, key=lambda pair: pair[1].line, reverse=True)

    def _drop_bare_head(self, occ: _Occurrence, key: tuple[Any, ...]) -> None:
        """An exception's type alone on its line, just above a message of its class that
        another signature reads, is that message's head: it leaves no incident of its own (its
        group would name another framework)."""
        recent = self._recent.get(occ.signature.cls)
        if not recent:
            return
        group, head = recent[-1]
        if (head.numbers.get(BARE) and group.count == 1 and group.key != key
                and head.source_index == occ.source_index
                and 0 < occ.line - head.line <= _BARE_HEAD_REACH
                and self._groups.get(group.key) is group):
            del self._groups[group.key]
            recent.pop()

    def _attach(self, occ: _Occurrence) -> bool:
        """Merge a continuation line's numbers into the occurrence it continues."""
        sig = occ.signature
        best: tuple[_Group, _Occurrence] | None = None
        for group, target in self._recent_for(sig):
            if target.source_index != occ.source_index:
                continue
            if not 0 <= occ.line - target.line <= sig.window:
                continue
            if sig.group and group.key[1] != sig.group:
                continue
            if occ.rank is None or target.rank is None or occ.rank == target.rank:
                best = (group, target)
                break
        if best is None:
            return False
        group, target = best
        for key, value in occ.numbers.items():
            if key == "processes":
                seen = {p["pid"] for p in target.numbers.get("processes", [])}
                target.numbers.setdefault("processes", []).extend(
                    p for p in value if p["pid"] not in seen)
            elif target.numbers.get(key) is None or (sig.overrides and value is not None):
                target.numbers[key] = value
        group.note(occ)
        group.refresh_primary(target)
        return True

    def incidents(self) -> list[Incident]:
        """Every incident, root cause first."""
        self._ctx = replace(self._ctx, facts=dict(self._facts))
        explainers = self._explainers()
        groups = [group for group in self._groups.values()
                  if not group.source_indexes <= self._catalogues]
        pasted = [group.source_indexes <= explainers and self._warning_pasted_for(group)
                  for group in groups]
        built = [self._build(group, group.source_indexes <= explainers and not why)
                 for group, why in zip(groups, pasted, strict=True)]
        told = {_where(incident) for (incident, _), group in zip(built, groups, strict=True)
                if group.primary.numbers.get(TOLD)}
        built = _headings_restating(built, [group.in_body for group in groups])
        built = _warnings_changes_are_about(built, pasted)
        built = _absurd_sizes_after_collectives(
            built, [bool(group.primary.numbers.get("requested_over_1eb")) for group in groups])
        built = _kills_after_collectives(built)
        built = _library_faults_under_xids(built)
        built = self._titles_after_text(built)
        titled = self._titles(built, explainers)
        built = _told_under_titles(built, titled) + titled
        built = self._guest_device_handles(built)
        built = self._host_arenas(built)
        built = _cudnn_alloc_failures(built, self._ctx)
        built = _cudnn_statuses_told_oom(built)
        built = _ignored_settings_alone(built, self._reports())
        built.sort(key=lambda item: (item[0].severity < Severity.ERROR, item[0].tier, item[1]))
        incidents = _messages_before_tellings([incident for incident, _order in built], told)
        return _with_roles(incidents)

    def _warning_pasted_for(self, group: _Group) -> bool:
        """Is the group a warning a change or a how-to pastes as the program printed it
        (torch's "Warning: " before it), in a text whose title names what the warning names
        ("Use PYTORCH_ALLOC_CONF instead of deprecated PYTORCH_CUDA_ALLOC_CONF" over "Warning:
        PYTORCH_CUDA_ALLOC_CONF is deprecated ...")? The text was written because its run
        printed it; it quotes nothing."""
        occ = group.primary
        if occ.signature.severity != Severity.WARNING or not _PRINTED_WARNING.search(
                occ.text, max(0, occ.match_start - len("Warning: ")), occ.match_start):
            return False
        names = set(_IDENTIFIER.findall(occ.text, occ.match_start))
        return any(name in line for i in group.source_indexes if i in self._heads
                   for line in self._heads[i].subject() for name in names)

    def _reports(self) -> set[str]:
        """The sources whose text says a problem happened to its writer (first-person words, a
        bug template, a pasted block), as opposed to a plain log that may have run well."""
        return {self.sources[i] for i, head in self._heads.items()
                if head.own_run or head.fenced or i in self._own_run}

    def _titles_after_text(self, built: list[tuple[Incident, tuple[int, int]]]
                           ) -> list[tuple[Incident, tuple[int, int]]]:
        """A message seen only in a thread's heading restates one the text pastes below it,
        usually with more (a rank, a status): among failures of the same tier it comes after
        the text's own messages, not first because it is on line 1."""
        headings = {(self.sources[i], head.title_line) for i, head in self._heads.items()
                    if head.heading}
        out = []
        for incident, order in built:
            if incident.locations and all((loc.source, loc.line) in headings
                                          for loc in incident.locations):
                order = (order[0], _AFTER_TEXT)
            out.append((incident, order))
        return out

    def _titles(self, built: list[tuple[Incident, tuple[int, int]]], explainers: set[int]
                ) -> list[tuple[Incident, tuple[int, int]]]:
        """A failure named only in a thread's title, for each source where nothing else was
        found and the text says the failure happened to its writer."""
        # (a failure told in general words leaves the title to name it, or what it echoes)
        failing = {name for incident, _ in built if incident.is_failure
                   and incident.signature not in _TOLD_UNDER_TITLE for name in incident.sources}
        # a message of the run itself (a warning, not a quotation) says the text reports a run
        logged = {name for incident, _ in built if incident.severity >= Severity.WARNING
                  for name in incident.sources}
        # a first line that is itself a message read above is no title to read again (a
        # heading read only as context, "# ... causes out of memory error on device" as a cause
        # told, is)
        read = {(loc.source, loc.line) for incident, _ in built for loc in incident.locations}
        read_failing = {(loc.source, loc.line) for incident, _ in built
                        if incident.severity >= Severity.WARNING for loc in incident.locations}
        # the GPU's out-of-memory the text's messages show, even as notes (TensorFlow's retries)
        gpu_oom = {name: ("cuda-oom/tensorflow" if incident.signature.startswith(
                          "cuda-oom/tensorflow") else "cuda-oom/caching-allocator")
                   for incident, _ in built if incident.cls == "cuda-oom"
                   for name in incident.sources}
        out = []
        for index, head in sorted(self._heads.items()):
            name = self.sources[index]
            if (name in failing or index in explainers or index in self._catalogues
                    or (name, head.title_line) in (read_failing if head.heading else read)):
                continue
            sig_id = title_failure(head, name in logged, gpu_oom.get(name))
            if sig_id is None:
                continue
            sig = SIGNATURE_BY_ID[sig_id]
            numbers = in_range(title_numbers(head, sig_id))
            advice = sig.advise({**numbers, "_count": 1}, self._ctx)  # (an Xid's number)
            incident = Incident(
                cls=sig.cls, signature=sig.id, title=f"Named in the title: {advice.title}",
                severity=max(advice.severity, Severity.ERROR, key=lambda s: s.rank), role="",
                explanation="The text's title names this failure and the text says it "
                "happened, but no message of it is in the text (cut, or only described): "
                + advice.explanation,
                remedy=advice.remedy, line_numbers=[head.title_line],
                excerpt=redact_text(head.title[:EXCERPT_CHARS]),
                numbers=numbers, count=1,
                diagnosis=advice.diagnosis, locations=[Location(name, head.title_line)],
                sources=[name], tier=advice.tier + 3.0)
            out.append((incident, (index, head.title_line)))
        return out

    def _guest_device_handles(self, built: list[tuple[Incident, tuple[int, int]]]
                              ) -> list[tuple[Incident, tuple[int, int]]]:
        """nvidia-smi's lost device handle in a text whose first lines put the GPU behind a
        hypervisor (a vGPU driver, a GPU passed through with VFIO), whatever its PCI slot: the
        guest's driver could not start it, as at a virtual machine's emulated slot; a GPU that
        fell off a bare-metal bus is no reading there."""
        virtual = {self.sources[i] for i, head in self._heads.items() if head.virtual_gpu}
        if not virtual:
            return built
        guest = SIGNATURE_BY_ID["nvml-unavailable/guest-device-handle"]
        out = []
        for incident, order in built:
            if (incident.signature == "gpu-hardware/device-handle"
                    and set(incident.sources) <= virtual):
                advice = guest.advise(dict(incident.numbers), self._ctx)
                incident = replace(
                    incident, cls=guest.cls, signature=guest.id, title=advice.title,
                    severity=min(incident.severity, advice.severity), tier=advice.tier,
                    explanation=advice.explanation, remedy=advice.remedy,
                    diagnosis=advice.diagnosis)
            out.append((incident, order))
        return out

    def _host_arenas(self, built: list[tuple[Incident, tuple[int, int]]]
                     ) -> list[tuple[Incident, tuple[int, int]]]:
        """ONNX Runtime's arena fails in the same words on the CPU as on the GPU: where the
        log says the arena that failed was the CPU's, the failure is the host's memory."""
        host = SIGNATURE_BY_ID["host-oom/framework-allocator"]
        out = []
        for incident, order in built:
            if (incident.signature == "cuda-oom/framework-allocator"
                    and incident.numbers.get("framework") == "onnxruntime"
                    and str(onnxruntime_arena(incident.numbers, self._ctx.facts)).lower()
                    == "cpu"):
                numbers = {k: v for k, v in incident.numbers.items() if k != "arena"}
                advice = host.advise(numbers, self._ctx)
                incident = replace(
                    incident, cls=host.cls, signature=host.id, title=advice.title,
                    severity=min(incident.severity, advice.severity), tier=advice.tier,
                    explanation=advice.explanation, remedy=advice.remedy,
                    diagnosis=advice.diagnosis, numbers=numbers)
            out.append((incident, order))
        return out

    def _build(self, group: _Group, quoted: bool = False) -> tuple[Incident, tuple[int, int]]:
        occ = group.primary
        numbers = dict(occ.numbers)
        if len(group.ranks) > 1:
            numbers["_ranks"] = sorted(group.ranks)  # for the text only
        numbers["_count"] = group.count  # some messages matter only when they repeat
        # ... or when the log ends on them (retries that never succeeded)
        numbers["_log_end"] = (group.latest.line + _LOG_END_LINES
                               >= self._last_line.get(group.latest.source_index, 0))
        advice = occ.signature.advise(numbers, self._ctx)
        if group.handled >= group.count and advice.severity >= Severity.ERROR:
            advice = replace(advice, severity=Severity.WARNING, tier=5.0,
                             explanation=advice.explanation + " The program caught it and went "
                             "on (the log says so), so it did not end the run.")
        if quoted and advice.severity > Severity.INFO:
            advice = replace(advice, severity=Severity.INFO, tier=5.0,
                             title=f"Quoted in an explanation: {advice.title}",
                             explanation="The text explains this message (an article, a "
                             "tutorial or an answer) rather than reporting it; if it did happen "
                             "here: " + advice.explanation)
        if group.key[-1] is _MORE:
            advice = replace(advice, explanation=advice.explanation + (
                f" The log names more than {MAX_KEYED} different values of "
                f"{occ.signature.key_field}; the lines with the values past the first "
                f"{MAX_KEYED} are counted together here, shown by one of them."))
        locations = [Location(self.sources[s], line, end if end > line else None)
                     for s, line, end in group.locations]
        incident = Incident(
            cls=occ.signature.cls,
            signature=occ.signature.id,
            title=advice.title,
            severity=advice.severity,
            role="",
            explanation=advice.explanation,
            remedy=advice.remedy,
            line_numbers=[loc.line for loc in locations],
            excerpt=_excerpt(occ),
            numbers={k: v for k, v in advice.numbers.items() if not k.startswith("_")},
            count=group.count,
            diagnosis=advice.diagnosis,
            locations=locations,
            sources=[self.sources[i] for i in sorted(group.source_indexes)],
            ranks=sorted(group.ranks),
            tier=advice.tier,
        )
        return incident, group.order


_AFTER_TEXT = 1 << 62  # the reading order of a message seen only in a heading
# lines after a message that still count as the log ending on it (a cut line, a code fence
# closing a paste, a blank line and a last remark)
_LOG_END_LINES = 4
_MORE = object()  # the key value of the incident that counts the values past MAX_KEYED
_LIBRARY_CLASSES = ("cublas-failure", "cudnn-failure")
# A worker's SIGKILL seen only by its exit (no kernel or scheduler record of memory)
_BARE_KILLS = ("host-oom/sigkill", "host-oom/shell-killed")


def _first_line(incident: Incident, source: str) -> int | None:
    lines = [loc.line for loc in incident.locations if loc.source == source]
    return min(lines) if lines else None


def _kills_after_collectives(built: list[tuple[Incident, tuple[int, int]]]
                             ) -> list[tuple[Incident, tuple[int, int]]]:
    """A worker killed with SIGKILL after a collective of the same log had failed or timed out
    is the job being taken down (the launcher's or the scheduler's kill of the workers left
    hanging), not what stopped the collective: the NCCL failure comes first. Where the log
    also holds memory's own record (the kernel's OOM killer, a cgroup's limit), the kill keeps
    its place: then the memory ran out, and the collective waited on the rank it took."""
    failures = [incident for incident, _ in built if incident.is_failure]
    memory = {source for incident in failures if incident.cls == "host-oom"
              and incident.signature not in _BARE_KILLS for source in incident.sources}
    out = []
    for incident, order in built:
        # (a kill seen in several logs keeps its place if any of them records memory)
        bare = (incident.signature in _BARE_KILLS and incident.is_failure
                and not memory.intersection(incident.sources))
        earlier = [(nccl, source, line) for nccl in failures if nccl.cls == "nccl"
                   for source in incident.sources
                   if (line := _first_line(nccl, source)) is not None
                   and line < (_first_line(incident, source) or 0)] if bare else []
        if earlier:
            _, source, first = min(earlier, key=lambda found: (found[1], found[2]))
            where = f"line {first}" + (f" of {source}" if len(incident.sources) > 1 else "")
            incident = replace(
                incident, tier=max(nccl.tier for nccl, _, _ in earlier) + 0.5,
                explanation=incident.explanation + f" Here it came after the collective "
                f"failure on {where} and nothing in the log records memory running out: the "
                "workers left hanging were killed as the job was taken down. Fix the "
                "collective first.")
        out.append((incident, order))
    return out


def _absurd_sizes_after_collectives(built: list[tuple[Incident, tuple[int, int]]],
                                    absurd: list[bool]
                                    ) -> list[tuple[Incident, tuple[int, int]]]:
    """An out-of-memory for "more than 1EB" is no size a program asks for: a length read from a
    broken state. In a log where a collective failed or timed out (an NCCL failure), that
    failure is the cause and the absurd request its consequence (``absurd``: which of ``built``
    asked for more than 1EB)."""
    collective = [incident for incident, _ in built
                  if incident.cls == "nccl" and incident.is_failure]
    if not collective or not any(absurd):
        return built
    out = []
    for (incident, order), flagged in zip(built, absurd, strict=True):
        after = [c for c in collective if set(c.sources) & set(incident.sources)]
        if flagged and incident.is_failure and after:
            incident = replace(
                incident, tier=max(c.tier for c in after) + 0.5,
                explanation=incident.explanation + " The same log's collective failure comes "
                "first: a request of more than 1 EB is a size read from the state it left "
                "broken, so fix the collective and this goes with it.")
        out.append((incident, order))
    return out


def _library_faults_under_xids(built: list[tuple[Incident, tuple[int, int]]]
                               ) -> list[tuple[Incident, tuple[int, int]]]:
    """A cuDNN or cuBLAS failure in a log whose kernel messages record Xid events: the driver's
    record of the GPU fault is the cause, and the library's status how it reached the program.
    Such an Xid (even one that alone is a warning, like 13, 31 or 43) becomes the root cause."""
    library = [incident for incident, _ in built
               if incident.cls in _LIBRARY_CLASSES and incident.is_failure]
    if not library:
        return built
    sources = {name for incident in library for name in incident.sources}
    tier = min(incident.tier for incident in library)
    out = []
    for incident, order in built:
        if (incident.signature == "gpu-hardware/xid" and not incident.is_failure
                and incident.severity >= Severity.WARNING and sources & set(incident.sources)):
            incident = replace(
                incident, severity=Severity.ERROR, tier=min(incident.tier, tier - 0.1),
                explanation=incident.explanation + " The same log's cuDNN/cuBLAS failure is "
                "how this GPU fault reached the program; check the GPU before the library.")
        out.append((incident, order))
    return out


def _cudnn_alloc_failures(built: list[tuple[Incident, tuple[int, int]]], ctx: AdviceContext
                          ) -> list[tuple[Incident, tuple[int, int]]]:
    """cuDNN's allocation failure printed as its number ("status == CUDNN_STATUS_SUCCESS (0 vs.
    2)", "cuDNN failure 2"): the same out-of-memory as the status's name, and its class."""
    oom = SIGNATURE_BY_ID["cuda-oom/cudnn-alloc-failed"]
    out = []
    for incident, order in built:
        if incident.cls == "cudnn-failure" and oom.regex.fullmatch(
                str(incident.numbers.get("status", ""))):
            advice = oom.advise(dict(incident.numbers), ctx)
            incident = replace(
                incident, cls=oom.cls, signature=oom.id, title=advice.title,
                tier=advice.tier, explanation=advice.explanation, remedy=advice.remedy,
                diagnosis=advice.diagnosis)
        out.append((incident, order))
    return out


# The diagnoses of a cuDNN failure that an out-of-memory explains (not an unsupported call).
_CUDNN_MEMORY_DIAGNOSES = ("memory-or-mismatch", "execution", "out-of-memory")


def _cudnn_statuses_told_oom(built: list[tuple[Incident, tuple[int, int]]]
                             ) -> list[tuple[Incident, tuple[int, int]]]:
    """A cuDNN status that names no cause, in a text that says the failure was the GPU running
    out of memory ("I found it was running out of memory"): the out-of-memory is the root cause,
    and the status how it reached the program."""
    # (cuBLAS's handle or allocation failures too: they allocate outside the cache the same way)
    cudnn = [incident for incident, _ in built if incident.is_failure and (
        (incident.cls == "cudnn-failure" and incident.diagnosis in _CUDNN_MEMORY_DIAGNOSES)
        or (incident.cls == "cublas-failure" and incident.diagnosis == "out-of-memory"))]
    if not cudnn:
        return built
    out = []
    for incident, order in built:
        paired = [c for c in cudnn if set(c.sources) & set(incident.sources)]
        if incident.signature == "cuda-oom/told-cause" and not incident.is_failure and paired:
            library = "cuBLAS" if paired[0].cls == "cublas-failure" else "cuDNN"
            status = paired[0].numbers.get("status") or (
                "" if library == "cuBLAS" else paired[0].title)
            incident = replace(
                incident, severity=Severity.ERROR, tier=min(c.tier for c in paired) - 0.1,
                title=f"CUDA out of memory, reported as a {library} failure",
                explanation=masked_oom_explanation(str(status), library),
                remedy=MASKED_OOM_REMEDY,
                diagnosis="unknown")
        out.append((incident, order))
    return out


# Why a warning alone in a report is its root cause, by class.
_ALONE_SETTING = "this setting, which did not take effect, is what to fix."
_ALONE_ROOT = {"gpu-hardware": "this GPU fault, recorded by the driver, is what the report is "
               "about."}


# Failures told in general words ("the card disappears", "nvidia-smi stopped working", "the
# job hangs in NCCL"): a thread's title may name the same failure by its message ("GPU has
# fallen off the bus", "Failed to initialize NVML: ...") or what a hang echoes ("uncorrectable
# ECC error and NCCL timeout"), so they leave the title to be read, and a title of their class
# takes their place (Signature.yields_to_titles).
_TOLD_UNDER_TITLE = frozenset(sig.id for sig in SIGNATURES if sig.yields_to_titles)


def _told_under_titles(built: list[tuple[Incident, tuple[int, int]]],
                       titled: list[tuple[Incident, tuple[int, int]]]
                       ) -> list[tuple[Incident, tuple[int, int]]]:
    """``built`` without the failures told in general words whose sources' titles, or
    messages, name a failure of the same class (the title's or the message's is the more
    precise)."""
    named = {(incident.cls, name) for incident, _ in titled for name in incident.sources}
    named |= {(incident.cls, name) for incident, _ in built
              if incident.is_failure and incident.signature not in _TOLD_UNDER_TITLE
              for name in incident.sources}
    return [(incident, order) for incident, order in built
            if not (incident.signature in _TOLD_UNDER_TITLE
                    and all((incident.cls, name) in named for name in incident.sources))]

# Signatures that tell in words that an allocator setting had no effect.
_SETTING_TOLD = frozenset({"alloc-conf/option-ignored-told"})


def _ignored_settings_alone(built: list[tuple[Incident, tuple[int, int]]], reports: set[str]
                            ) -> list[tuple[Incident, tuple[int, int]]]:
    """A setting the user made that did not take effect (expandable_segments on a platform
    without it) is a warning beside another failure, and in a plain log that may have run well;
    in a report of a problem (``reports``) where nothing else is a failure, it is the problem
    reported, and becomes its root cause."""
    # (a writer's telling that a setting had no effect is that warning retold: it leaves the
    # program's own warning the root cause)
    failing = {name for incident, _ in built if incident.is_failure
               and incident.signature not in _SETTING_TOLD for name in incident.sources}
    out = []
    for incident, order in built:
        sources = set(incident.sources)
        if (SIGNATURE_BY_ID[incident.signature].alone_root
                and incident.severity == Severity.WARNING
                and sources & reports and not failing & sources):
            incident = replace(
                incident, severity=Severity.ERROR, tier=min(incident.tier, 3.0),
                explanation=incident.explanation + " Nothing else in the log is a failure: "
                + _ALONE_ROOT.get(incident.cls, _ALONE_SETTING))
        out.append((incident, order))
    return out


# A markdown heading that holds only the message matched: a thread's title naming it.
_HEADING_BEFORE = re.compile(r"\s*#{1,6}\s+[*_`]*\s*")
# (and where it shows: "# CUDNN_STATUS_NOT_SUPPORTED in logs", "... during training")
_HEADING_AFTER = re.compile(
    r"[*_`]*(?:\s+(?:in|on|with|from|during|when|while)(?:\s+[a-z]+){1,2})?[\s.:!?]*")


def _heading_only(text: str, match: re.Match[str]) -> bool:
    return bool(_HEADING_BEFORE.fullmatch(text, 0, match.start())
                and _HEADING_AFTER.fullmatch(text, match.end()))


def _headings_restating(built: list[tuple[Incident, tuple[int, int]]], in_body: list[bool]
                        ) -> list[tuple[Incident, tuple[int, int]]]:
    """A heading that is only a message's name ("# CUDNN_STATUS_NOT_SUPPORTED") restates what
    the text pastes below it. When the text's own messages of that class are no failure (a
    warning that cuDNN turned one plan down and the convolution went on), neither is the
    heading: it takes their severity. (``in_body``: which of ``built`` was seen outside such a
    heading; a heading with no message of its class below stays as it is.)"""
    below: dict[tuple[str, str], list[Incident]] = {}
    for (incident, _), body in zip(built, in_body, strict=True):
        if body:
            for name in incident.sources:
                below.setdefault((incident.cls, name), []).append(incident)
    out = []
    for (incident, order), body in zip(built, in_body, strict=True):
        shown = [other for name in incident.sources for other in below.get((incident.cls, name),
                                                                            ())]
        if not body and incident.is_failure and shown and not any(o.is_failure for o in shown):
            incident = replace(
                incident, severity=max((o.severity for o in shown), key=lambda s: s.rank),
                tier=5.0, title=f"Named in a heading: {incident.title}",
                explanation="The text's heading names this status, and the text's own message "
                "of it below is no failure: " + shown[0].title + ".")
        out.append((incident, order))
    return out


# A pull request's own section heading ("## Fix", "## Solution"): the change's description, not
# a remedy offered to readers, so no explainer phrase in a pull request's thread.
_CHANGE_SECTION = re.compile(r"^\s*#{1,4}\s*(?:fix|solution|workaround)(?:es|s)?\s*$",
                             re.IGNORECASE)
# torch's own words before a warning it printed (TORCH_WARN's "Warning: ", Python's
# "UserWarning: "): the program printed it, nobody typed it.
_PRINTED_WARNING = re.compile(r"Warning: $")
# A name a warning and a title can share: an environment variable, an option, an identifier.
_IDENTIFIER = re.compile(r"\b[A-Za-z][A-Za-z0-9]*_\w{3,}|\b[a-z]+[A-Z]\w{3,}")


def _warnings_changes_are_about(built: list[tuple[Incident, tuple[int, int]]], pasted: list[bool]
                                ) -> list[tuple[Incident, tuple[int, int]]]:
    """A warning a change pastes as its run printed it, under a title that names its subject
    (``pasted``), is what the change is about: its root cause when nothing else in the text is
    a failure."""
    failing = {name for incident, _ in built if incident.is_failure for name in incident.sources}
    out = []
    for (incident, order), why in zip(built, pasted, strict=True):
        if why and incident.severity == Severity.WARNING and not failing & set(incident.sources):
            incident = replace(
                incident, severity=Severity.ERROR, tier=min(incident.tier, 3.0),
                explanation=incident.explanation + " The text is a change made because its "
                "run printed this warning, and nothing else in it is a failure.")
        out.append((incident, order))
    return out


def _where(incident: Incident) -> tuple[str, tuple[int, ...]]:
    """An incident's signature and lines: the same through the passes that rewrite its texts."""
    return incident.signature, tuple(incident.line_numbers)


def _messages_before_tellings(incidents: list[Incident], told: set[tuple[str, tuple[int, ...]]]
                              ) -> list[Incident]:
    """A failure told in the writer's words ("I got cuda out of memory") that ranks first, where
    the program's message of the same class ranks as high later in the text: the message (with
    its numbers) takes the telling's place."""
    first = next((i for i, incident in enumerate(incidents) if incident.is_failure), None)
    if first is None or _where(incidents[first]) not in told:
        return incidents
    head = incidents[first]
    message = next((i for i in range(first + 1, len(incidents))
                    if incidents[i].cls == head.cls and incidents[i].is_failure
                    and incidents[i].tier <= head.tier and _where(incidents[i]) not in told),
                   None)
    if message is None:
        return incidents
    out = list(incidents)
    out.insert(first, out.pop(message))
    return out


def _group_key(sig: Signature, numbers: dict[str, Any]) -> tuple[Any, ...]:
    if sig.key_field == "xid":
        xid = numbers.get("xid")
        # Xid 79 and "GPU has fallen off the bus" are the same event seen by two printers.
        return (sig.cls, "off-the-bus") if xid == 79 else (sig.cls, "xid", xid)
    key: tuple[Any, ...] = (sig.cls, sig.group or sig.id)
    if sig.key_field:
        key += (numbers.get(sig.key_field),)
    return key


def _excerpt(occ: _Occurrence) -> str:
    text = occ.text
    if len(text) > EXCERPT_CHARS:
        start = max(0, min(occ.match_start - 60, len(text) - EXCERPT_CHARS))
        text = ("…" if start else "") + text[start:start + EXCERPT_CHARS] + "…"
    return redact_text(text)


def _with_roles(incidents: list[Incident]) -> list[Incident]:
    """Root cause, its consequences (later in the causal chain), related failures, context."""
    root = next((i for i in incidents if i.is_failure), None)
    out = []
    for incident in incidents:
        if not incident.is_failure:
            role = "context"
        elif incident is root:
            role = "root-cause"
        elif root is not None and incident.tier > root.tier:
            role = "consequence"
        else:
            role = "related"
        out.append(replace(incident, role=role))
    return out


def in_range(value: Any) -> Any:
    """``value`` with every whole number no program prints (past 64 bits: a size, count or id in
    a hostile or corrupt log) left unread, as ``None``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if LOWEST_INT <= value <= LARGEST_INT else None
    if isinstance(value, list):
        return [in_range(item) for item in value]
    if isinstance(value, dict):
        return {key: in_range(item) for key, item in value.items()}
    return value
