"""Failure messages that are quoted, not reported, and failures the program says it caught.

Documentation, pull requests and explainers quote failure messages that never happened: "the
first kernel launch fails with either `CUDA error: no kernel image ...`, or ...", "you will see
the following error message". A match is such a *mention* when

- it lies inside an inline code span that the sentence goes on after (```...`, or```; but
  "`...` error" names the writer's own, and so does a quote after "I get", "we hit", "crashed
  with"), or
- it is a cell of a markdown table (``| 79 | GPU has fallen off the bus |``), or
- it lies inside a triple-quoted string (three double or single quotes: a docstring, a test's
  expected text, a pull request quoting the message it changes), or
- the words just before it on its line say the message is hypothetical ("you will see", "fails
  with either", "for example:"), or, for a message in an inline code span, the few lines above
  do.

A whole source is an *explainer* (a blog post, a tutorial, an answer that quotes the message
to explain it) when the lines around its matches carry phrases of several kinds that explain
an error rather than report one ("in this post", "this error means", "how to fix", "解决方法");
its incidents are kept as context, never as failures.

An issue that pastes its own error (at the end of a sentence, in a code block, in a title) is
not a mention. A failure is *caught* when the same line, or a line of its signature class's
``handles`` signatures right after it, says the program went on (``skipping batch``).
"""

from __future__ import annotations

import re

from gpu_audit.explain.documents import in_diff
from gpu_audit.explain.scanner import Candidate
from gpu_audit.explain.signatures import SIGNATURES

# Inline code, and quotation marks that prose (not a log) puts around a quoted message.
_CODE_SPAN = re.compile(r"``(.+?)``|`([^`\n]+)`|「[^」\n]+」|『[^』\n]+』|«[^»\n]+»")
_WORDS_AFTER = re.compile(r"[^\W\d_]{2,}")
# "I get `CUDA out of memory` error when ...": the writer's own failure, named after the quote.
_OWN_REPORT = re.compile(r"\W*(?:errors?|exceptions?|messages?|crash(?:es)?)\b", re.IGNORECASE)
# "... an error reason called `OOMKilled`, may I know how to fix it?": the writer asks about
# the message they quote, in the first person; it is theirs.
_FIRST_PERSON = re.compile(r"\b(?:I|me|my|we|us|our)\b")
_FIRST_PERSON_ANY_CASE = re.compile(_FIRST_PERSON.pattern, re.IGNORECASE)
# "I get `X` after a few hundred steps", "training crashed with `X` when ...": the words before an
# inline quote say the writer met the message, so prose after it does not make it an example.
_BY_WRITER = (
    r"\b(?:I|we|I'm|I've|I'd|we're|we've|my|our|me|us)\b[^.`!?]{0,80}?\b(?:get|gets|got|"
    r"getting|see|saw|seeing|hit|hitting|encounter(?:ed|ing)?|ran into|run into|running into|"
    r"receive[ds]?|receiving|fac(?:e|ed|ing)|ha(?:ve|d|ving)|observe[ds]?|keep getting|"
    r"experienc(?:e|ed|es|ing)|"
    r"reproduce[ds]?|end(?:s|ed)? up with|met|meet|meeting)\b|"
    # "it gives me an error saying `X`": the writer's run answered them with it
    r"\b(?:gives?|gave|throws?|threw|shows?|showed|prints?|printed) me (?:an?|the|this) "
    r"(?:error|exception|message)(?: message)?(?: (?:saying|that says|like))?:?\s*$")
# (in a pull request only the writer's own words report: "X fails with `E`" there describes the
# failure the change is about)
_REPORTED_BY_WRITER = re.compile(_BY_WRITER, re.IGNORECASE)
_REPORTED_BEFORE = re.compile(
    _BY_WRITER + r"|"
    r"\b(?:fails?|failed|failing|crash(?:es|ed)?|die[sd]|stop(?:s|ped)|throws?|threw|raised?|"
    r"errors? out|errored out|exit(?:s|ed)?|abort(?:s|ed)?|dies) with\s*$|"
    # "... the next allocation trips `X`": an assert the writer's run hit
    r"\b(?:trips|tripped)(?: over| on)?\s*$|"
    # "it fails after a few seconds and gives `X`": the failure the writer met, then its message
    r"\b(?:fails?|failed|crash(?:es|ed)?|stops?|stopped|dies|died)\b[^.`!?]{0,60}?\b(?:and|then)"
    r" (?:gives?|gave|throws?|threw|shows?|showed|prints?|printed|spits? out)(?: me)?"
    r"(?: (?:this|the|an?))?(?: error| message)?:?\s*$|"
    r"(?:报错|出现了?|遇到了?|提示|エラーが出|발생)[^`]{0,10}$|"
    # an answer that reads the writer's error from what it printed: "This error seems related
    # to the system's memory, given the `X` and the `Y`" (this error: the thread's own)
    r"\b(?:this|your) (?:error|issue|problem|crash|failure)\b[^.!?]{0,160}?\b(?:given|"
    r"judging (?:by|from)|based on|pointing to|points to)\b[^.!?]{0,60}$|"
    # ... or quotes it from the log the writer attached ("From your log: `X`", "your log
    # shows `X`"; not "if your log shows ...")
    r"(?<!\bif )(?<!\bwhen )\b(?:from|in) (?:your|the attached|the posted|the uploaded) "
    r"(?:logs?|log file|output|traceback)\s*[:,]?\s*$|"
    r"(?<!\bif )(?<!\bwhen )\byour (?:logs?|log file|output|traceback) (?:says|shows|"
    r"contains|has)\s*:?\s*$",
    re.IGNORECASE)
# Phrases that announce a message as an example or a possibility, not as what happened.
HYPOTHETICAL = re.compile(
    r"\byou(?:'ll| will| may| might| would| could| can)(?: also)? (?:see|get|encounter|hit|"
    r"notice|observe|find)\b|\bsomething like (?:this|the following)\b|"
    r"\b(?:fails?|failing|crash(?:es)?|errors? out) with either\b|"
    r"\bwith either\b|\b(?:for example|for instance|e\.g\.|such as)[,:]?\s*$|"
    r"\b(?:looks|look) like this:?\s*$|可能(?:有|会|出现|报)|場合があります|"
    # a condition for the reader right before the message: "What to do if you get error:
    # \"not enough memory ...\"", "Or if you get NCudaLib::TOutOfMemoryError"
    r"\bif (?:you|one) (?:get|gets|see|sees|hit|hits|encounter|encounters|receive|run into)\b"
    r"[^.!?\n]{0,24}$|"
    # a condition in Chinese opening a quoted message: "如果出现类似“The detected CUDA version
    # ...”，请 ..." (if something like "..." appears, do ...)
    r"(?:如果|若是?|假如|要是|万一)[^。！？\n]{0,12}?[“\"「『‘'`]\s*$",
    re.IGNORECASE)
# A row of a markdown table (a list of errors and their meanings), not a log line.
_TABLE_ROW = re.compile(r"^\|(?:[^|\n]*\|){2,}\s*$")
# A line of an error catalogue: the message as the value of a pattern or signature field.
_CATALOGUE = re.compile(
    r"(?:^|[\s{,\"'])[\"']?(?:regex|pattern|signature|error_regex|match_regex)[\"']?\s*[:=]",
    re.IGNORECASE)
_LINES_ABOVE = 3
# A message with placeholders for its numbers ("Tried to allocate XXX MiB", "<size> GiB") is a
# template someone wrote, not a line a program printed.
_PLACEHOLDER = re.compile(
    r"(?:\bX{2,}|\b[XN](?:\.X+)|<[A-Za-z_ ]{1,20}>|\{[A-Za-z_]{1,20}\}) ?[KMG]i?B\b|"
    r"\bGPU X{1,3}\b")
# "catch `X`", "the handler for `X`", "raise `X` when ...": a sentence about code names the
# error it handles; it did not happen to the writer.
_CODE_VERB = re.compile(
    r"\b(?:catch(?:es|ing)?|handl(?:e|es|ed|ing|er)|rais(?:e|es|ing)|throw(?:s|ing)?|except|"
    r"return(?:s|ing)?|wrap(?:s|ping)?|import(?:s|ing)?|rename[sd]?|renaming|pars(?:e|es|ing)|"
    r"map(?:s|ping)?|convert(?:s|ing)?|translat(?:e|es|ing))\b[^.`!?]{0,40}$",
    re.IGNORECASE)

# "(err == cudaErrorMemoryAllocation)", "case NVML_ERROR_GPU_IS_LOST:", "status != X": an error
# constant compared in code; a program that hit the error prints it, it does not compare it.
# "What is Docker container exit code 137?", "what does exit status 137 mean?": a question about
# what a status's number means, in no one's run (no first-person word: "what does the exit code
# 137 I get mean?" is the writer's); the number alone says nothing happened.
_ASKS_STATUS_MEANING = re.compile(
    r"^[#>*_\s]*what(?:'s| is| are| does| do)\b[^\n]{0,80}?\b(?:exit|return|status)\b"
    r"[^\n]{0,30}?\b\d{1,3}\b[^\n]{0,40}\?[*_\s]*$", re.IGNORECASE)
_COMPARED_BEFORE = re.compile(r"(?:[=!]=|\bcase)\s*$")
_COMPARED_AFTER = re.compile(r"\s*[=!]=")


# "# `CUBLAS_STATUS_INTERNAL_ERROR` on training segmentation": a thread's heading that opens
# with the quoted message and goes on to say when it came; the writer's own failure, not a
# quotation (an explainer's heading goes on with what it is: "`X` explained").
_HEADING_OPEN = re.compile(r"\s*#{1,6}\s*$")
_WHEN_AFTER = re.compile(r"\s*(?:on|when|while|during|after|upon|at)\b", re.IGNORECASE)


def _asked_after(rest: str) -> bool:
    """Does the text after a quote ask the writer's own question ("... when I run it?")?"""
    # (two checks, not one pattern: a pattern spanning both backtracks quadratically)
    return rest.rstrip().endswith(("?", "？")) and _FIRST_PERSON.search(rest) is not None


# "Please note that this error `X` indicates ...", "your error `X` means ...": in an issue's
# thread, a reply that points at the error in front of it (this, that, your) reads the
# thread's own failure, whatever it goes on to explain (not "the error `X` usually means").
_THREADS_ERROR = re.compile(r"\b(?:this|that|your|the same) (?:error|exception)(?: message)?"
                            r"\s*[:,]?\s*$", re.IGNORECASE)


# "A CUDA out of memory error means the GPU ...", "NCCL timeout usually indicates ...": a message
# named as the subject of its definition, no quotes around it (not "... happens when I ...", nor
# "my ... error means I cannot train": the writer's own).
_DEFINED_AFTER = re.compile(
    r"[\W_]{0,3}(?:errors?|exceptions?|messages?|warnings?)?\s*(?:usually |typically |simply |"
    r"generally |often |basically |just )?(?:means|indicates|signifies|is (?:raised|thrown) when|"
    r"(?:occurs|happens|appears) when (?!(?:I|we)\b))", re.IGNORECASE)


_SENTENCE_END_AT = re.compile(r"[.!?。！？](?:\s|$)")


def _defined(text: str, match: re.Match[str]) -> bool:
    """Is the message matched in ``text`` the subject of a sentence that defines it? (In an
    issue's thread a reply's "the `X` error indicates ..." reads the thread's own failure.)"""
    defined = _DEFINED_AFTER.match(text, match.end())
    return (defined is not None
            and _FIRST_PERSON_ANY_CASE.search(text, 0, match.start()) is None
            # ("... means we don't find the nodes": what it did to the writer's run)
            and _FIRST_PERSON_ANY_CASE.search(_SENTENCE_END_AT.split(
                text[defined.end():], 1)[0]) is None)


def is_mention(candidate: Candidate, text: str, match: re.Match[str],
               change: bool = False, issue: bool = False) -> bool:
    """Is the message matched in ``text`` quoted as an example rather than reported?
    (``change``: the text is a pull request or a patch; ``issue``: an issue's thread.)"""
    quoted = next((span for span in _CODE_SPAN.finditer(text)
                   if span.start() <= match.start() and match.end() <= span.end()), None)
    if quoted is not None and _opens_paste(candidate, text, quoted):
        quoted = None
    if quoted is not None:
        rest = "" if _closes_own_line(candidate, text, quoted) else (
            text[quoted.end():].split("`", 1)[0])
        before = text[:quoted.start()] or _sentence_above(candidate, text)
        heading_told = bool(_HEADING_OPEN.fullmatch(text[:quoted.start()])
                            and _WHEN_AFTER.match(rest))
        thread_error = issue and bool(_THREADS_ERROR.search(text[:quoted.start()]))
        if not (heading_told or thread_error or _reported(before, change)
                or _run_printed(before, quoted, text)) and (
                (_WORDS_AFTER.search(rest) and not _OWN_REPORT.match(rest)
                 and not _asked_after(rest))
                or _CODE_VERB.search(before)):
            return True
    if (_PLACEHOLDER.search(text, match.start()) or _compared(text, match)
            or _in_code_literal(text, match)
            or (quoted is None and not issue and _defined(text, match))):
        return True
    if in_diff([line for _, line in candidate.before], text):
        return True
    # (nvidia-smi's boxed table is a tool's output, not a markdown list of errors: a field it
    # could not read, "ERR!", is reported there)
    if (HYPOTHETICAL.search(text[:match.start()])
            or (_TABLE_ROW.match(text) and "ERR!" not in match.group(0))
            or _status_table_row(candidate)):
        return True
    if _ASKS_STATUS_MEANING.match(text) and not _FIRST_PERSON.search(text):
        return True
    if _in_string_literal(candidate, text, match):
        return True
    if quoted is None:  # a pasted log after "you will see:" in a bug report is still a report
        return False
    above = [line for _, line in candidate.before if line.strip()][-_LINES_ABOVE:]
    return any(HYPOTHETICAL.search(line.strip()) for line in above)


# A library reference's table of what a call returns, its cells run together when the page
# was copied ("Return Value  Meaning" over "CUBLAS_STATUS_ALLOC_FAILED  the resources could not
# be allocated"): each row starts with a status's name; a log prints a status after its words.
_STATUS_FIRST = re.compile(r"\s*[|`*]*\s*(?:[A-Z][A-Z0-9]*_(?:STATUS|ERROR)_[A-Z0-9_]+|"
                           r"cuda(?:Error\w*|Success)|CUDA_(?:ERROR_[A-Z_]+|SUCCESS))")
_RETURN_HEADER = re.compile(
    r"\s*[#*|\s]*(?:Return(?:ed)? ?(?:Values?|Codes?|Status(?:es)?)|Error ?Codes?|返回值|"
    r"返回状态|戻り値|반환 ?값)[\s|*:]*(?:Meanings?|Descriptions?|说明|含义|意味|설명)?[\s|*:]*$",
    re.IGNORECASE)  # (a header line alone: "Error code: 700" is a log's line)


def _status_table_row(candidate: Candidate) -> bool:
    """Is the candidate a row of a reference's table of return values: a line that starts with
    a status's name, under a header that names the table, with only such rows between?"""
    if not _STATUS_FIRST.match(candidate.text):
        return False
    for _, line in reversed(candidate.before):
        if not line.strip():
            continue
        if _RETURN_HEADER.match(line):
            return True
        if not _STATUS_FIRST.match(line):
            return False
    return False


def _closes_own_line(candidate: Candidate, text: str, quoted: re.Match[str]) -> bool:
    """Does the quote close at the end of the candidate's own line? The words after it then come
    from the next line, joined on as if a terminal had wrapped a long line: the writer set the
    message on a line of its own, as a short line's quote is read (no sentence goes on after)."""
    own = candidate.text.rstrip()
    at = text.find(own)
    return own.endswith("`") and at >= 0 and quoted.end() == at + len(own)


def _opens_paste(candidate: Candidate, text: str, quoted: re.Match[str]) -> bool:
    """Does the candidate's line open with a backtick it does not close, the span running on
    into the lines joined after it? The writer set a pasted message of several lines in single
    backticks (a block, not a quote in a sentence); a backtick inside the message
    ("Compile with `TORCH_USE_CUDA_DSA` ...") then closes the span too early."""
    own = candidate.text.strip()
    return (own.startswith("`") and not own.startswith("``") and own.count("`") % 2 == 1
            and text.find(own) == quoted.start() and quoted.end() > quoted.start() + len(own))


_SENTENCE_END = re.compile(r"[.!?:;。！？：；]\s*$")


def _sentence_above(candidate: Candidate, text: str) -> str:
    """The line above a line that starts with an inline quote, when its sentence runs on into
    the quote ("I met the problem showing" / "`X` on node 0"): the words before the quote.
    (Lines above that are part of ``text``, a message joined again after a terminal wrapped
    it, are the quote itself.)"""
    above = next((line.strip() for _, line in reversed(candidate.before)
                  if line.strip() and line.strip() not in text), "")
    return "" if not above or _SENTENCE_END.search(above) else above


def _compared(text: str, match: re.Match[str]) -> bool:
    """Is the match an error constant compared in a line of code (``x == cudaErrorX``)?"""
    return bool(re.fullmatch(r"\w+", match[0])) and bool(
        _COMPARED_BEFORE.search(text, 0, match.start()) or _COMPARED_AFTER.match(text, match.end()))


# The code before a string literal that holds the message: a statement that tests, raises or
# returns it ('if "CUDA out of memory" in str(e):', 'raise RuntimeError("CUDA error: ...")'), a
# logging or print call ('logger.warning("CUDA out of memory, halving the batch")'), a
# comparison. (A repr in a log, 'RuntimeError("CUDA out of memory ...")' after a prefix, is none
# of these.)
_CODE_BEFORE_LITERAL = re.compile(
    # (the literal right after the keyword, or an exception built with it: "If I run it I get
    # 'CUDA out of memory'" and "while training, 'X' appears" are a writer's report)
    r"(?:\b(?:if|elif|assert)\s+(?:not\s+)?|\b(?:raise|throw)\s+(?:new\s+)?[\w.]+\(\s*|"
    r"\b(?:log(?:ger|ging)?|LOG(?:GER)?|warnings|console|self\.log(?:ger)?)\.\w+\(\s*|"
    r"\b(?:print|warn|raises|assert\w*)\(\s*(?:[^\"'\n]{0,40}?,\s*)?(?:\w+\s*=\s*)?|"
    r"(?:==|!=)\s*)[rbfuRBFU]{0,2}[\"']$")
_LITERAL_REACH = 160  # characters of code looked at before the literal


def _in_code_literal(text: str, match: re.Match[str]) -> bool:
    """Is the match the start of a string literal in a line of code (a test, a raise, a
    logging call)? A program that handles the message; the message did not happen."""
    return bool(_CODE_BEFORE_LITERAL.search(text, max(0, match.start() - _LITERAL_REACH),
                                            match.start()))


_TRIPLE_QUOTE = re.compile(r'"""|\'\'\'')
# Python's worker pools print a worker's traceback between triple quotes under this head
# ("multiprocessing.pool.RemoteTraceback:", concurrent.futures' "_RemoteTraceback:"): a
# traceback that happened, not a string literal.
_REMOTE_TRACEBACK = re.compile(r"\bRemoteTraceback:\s*$")


def _remote_traceback(candidate: Candidate) -> bool:
    """Is the last triple quote above the candidate the one a worker pool opens its remote
    traceback with, under the pool's head?"""
    lines = [line for _, line in candidate.before]
    for index in range(len(lines) - 1, -1, -1):
        if _TRIPLE_QUOTE.search(lines[index]):
            return index > 0 and bool(_REMOTE_TRACEBACK.search(lines[index - 1]))
    return False


def _in_string_literal(candidate: Candidate, text: str, match: re.Match[str]) -> bool:
    """Is the match between an opening triple quote (an odd number of them in the lines before
    it, within the context kept) and a closing one (on its line or in the lines after)?"""
    opened = sum(len(_TRIPLE_QUOTE.findall(line)) for _, line in candidate.before)
    opened += len(_TRIPLE_QUOTE.findall(text, 0, match.start()))
    if opened % 2 == 0 or _remote_traceback(candidate):
        return False
    return bool(_TRIPLE_QUOTE.search(text, match.end())) or any(
        _TRIPLE_QUOTE.search(line) for _, line in candidate.after)


def _reported(before: str, change: bool = False) -> bool:
    """Do the words before an inline quote say the writer met the message (and do not make
    it hypothetical: "you will see", "fails with either")? In a pull request (``change``) only
    the writer's own words do: "queries fail with `X`" there describes what the change fixes."""
    reported = _REPORTED_BY_WRITER if change else _REPORTED_BEFORE
    return bool(reported.search(before)) and not HYPOTHETICAL.search(before)


# "the network returns `cuDNN error: X` when ...", "this code results in `X`", "it throws this
# error for one system: `X`": something the writer ran answered with the quoted message. Only a
# message as a program prints it (a prefix that names an error, then a colon) counts: a
# reference's "returns `CUBLAS_STATUS_NOT_SUPPORTED` if ..." names a status, not a failure.
_RESULT_BEFORE = re.compile(
    r"\b(?:returns|returned|results in|resulted in|produces|produced|leads to|led to|throws|"
    r"threw|gives|gave|raises|raised|ends with|ended with|"
    # ("rank 1 on node 7 logged the first `X`": a log of the writer's run held it)
    r"logged|printed|"
    # ("a single-card rig on WSL2 hits `X` right after the weights load": the run met it)
    r"hits|hit|encounters|encountered|runs into|ran into)\b[^.`!?]{0,60}?:?\s*$")
# (a status's name, then its description: "CUDA_ERROR_CONTAINED: Invalid access of ...")
_PRINTED = re.compile(r"`{1,2}[^`\n]{0,40}?(?:(?:error|Error|ERROR|Exception)\b[^`\n:]{0,40}?|"
                      r"\b[A-Z][A-Z0-9]*_(?:ERROR|STATUS)_[A-Z0-9_]+): ")
# ... and not a rule an explainer states: "if the labels are out of range, PyTorch raises `X`
# when you call backward" (a condition, the reader, a modal verb)
_GENERAL = re.compile(r"\b(?:if|when|whenever|unless|once|you|your|may|might|can|could|would|"
                      r"will|should)\b", re.IGNORECASE)
_SENTENCE_BREAK = re.compile(r"[.!?;。！？；](?:\s|$)")


def _run_printed(before: str, quote: re.Match[str], text: str) -> bool:
    """Does the sentence before an inline quote say a run produced it, and is the quote a
    message as a program prints it?"""
    if not _PRINTED.match(quote[0]) or not _RESULT_BEFORE.search(before):
        return False
    sentence = _SENTENCE_BREAK.split(before)[-1]
    rest = _SENTENCE_BREAK.split(text[quote.end():], 1)[0]
    return not (HYPOTHETICAL.search(before) or _GENERAL.search(sentence)
                or re.search(r"\byou(?:r)?\b", rest, re.IGNORECASE))


def is_catalogue(text: str) -> bool:
    """Is this line a field of an error catalogue (``REGEX=...``, ``"signature": "..."``)? A
    document with such lines lists failures; it does not report one."""
    return bool(_CATALOGUE.search(text))


# A question to the reader ("Have you ever hit ...?", "...적 있나요?"): an article's opening,
# read even though it ends with a question mark (the reporter's own questions are not cues).
_RHETORICAL = (r"\bhave you ever (?:seen|encountered|hit|run into|gotten|got|been|faced|had)\b|"
               # ("... and you get CUDA out of memory. Sound familiar?", "Знакомо?")
               r"\bsounds? familiar\?|(?<!\w)знаком(?:о|ая ситуация|ая картина)\?|"
               r"적(?: ?이)? 있(?:나요|으신가요|으세요|습니까)|こと(?:は|が)?ありませんか|"
               r"你(?:是否|有没有|有沒有)(?:也)?(?:遇到|碰到|见过)")
_RHETORICAL_QUESTION = re.compile(_RHETORICAL, re.IGNORECASE)
# What explainers, blog posts and answers say around the errors they quote, in the languages
# people write them in. One phrase can be a reply in a bug report ("this error means ..."), so
# a source reads as an explainer only with EXPLAINER_MIN_CUES different ones.
# a message in quotes inside a sentence ("el error «CUDA out of memory» significa")
_QUOTED = r"(?:«[^»\n]{1,80}»|\"[^\"\n]{1,80}\"|'[^'\n]{1,80}')"
_EXPLAINER_CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (key, re.compile(pattern, re.IGNORECASE)) for key, pattern in (
        ("this-article", r"\bin this (?:post|article|tutorial|guide|blog|write-?up|video)\b|"
                         # a documentation site's heading, its permalink sign kept by the copy
                         # ("What it is¶")
                         r"^[^\n¶]{1,120}¶\s*$|"
                         # a page of questions and answers, by its heading
                         r"^(?:frequently asked questions|FAQs?)$|"
                         r"\bthis (?:post|article|tutorial|guide) (?:explains|covers|shows|"
                         r"addresses|describes|discusses|explores|walks|delves|examines)\b|"
                         r"\b(?:this|the first) (?:blog )?post (?:is )?about\b|"
                         # (not a program's pointer to one: SageMaker's "Check troubleshooting
                         # guide for common errors")
                         r"(?<!\bcheck )(?<!\bsee )(?<!\bcheck the )(?<!\bsee the )"
                         r"\btroubleshooting guide\b|^(?:quick answer|tl;?dr)\b|"
                         # (a guide's opening answer in Spanish, Portuguese, French)
                         r"^(?:respuesta r[aá]pida|resposta r[aá]pida|r[ée]ponse rapide)\b|一文|"
                         r"本文|这篇文章|這篇文章|本篇|本指南|本教程|"
                         r"この記事|本記事|이 글|이번 글|설명해 ?드릴게요|"
                         r"설명해 ?드리겠습니다|в этой статье|"
                         r"in diesem (?:artikel|beitrag)|en este art[ií]culo|dans cet article|"
                         r"neste artigo|"
                         # a book's chapter, and a guide in Spanish, Portuguese or French ("in
                         # this guide"; "this guide shows you", not "I followed this guide")
                         r"\bin this chapter\b|\bthis chapter (?:explains|covers|shows|gives|"
                         r"teaches|walks)\b|"
                         r"\ben (?:esta|este) (?:gu[ií]a|post|tutorial|entrada)\b|"
                         r"\best[ae] (?:gu[ií]a|art[ií]culo|post|tutorial) (?:te |le )?(?:muestra|"
                         r"explica|ense[ñn]a|cubre)\b|"
                         r"\bneste (?:guia|post|tutorial)\b|\best[ea] (?:guia|artigo|post|"
                         r"tutorial) (?:te |lhe )?(?:mostra|explica|ensina)\b|"
                         r"\bdans ce (?:guide|tutoriel|billet)\b|\bce (?:guide|tutoriel|article) "
                         r"(?:vous )?(?:montre|explique)\b|"
                         # Polish and Russian: "w tym artykule", "в этом руководстве", and
                         # "Если вкратце" (in short) opening an answer
                         r"\bw tym (?:artykule|poradniku|wpisie|przewodniku)\b|"
                         # Indonesian and Malay: "di akhir panduan ini", "dalam artikel ini"
                         r"\b(?:dalam|di|pada) (?:akhir )?(?:artikel|panduan|tutorial|tulisan|"
                         r"postingan|catatan) ini\b|"
                         r"в этом (?:руководстве|посте|материале|гайде)|^если (?:вкратце|коротко)|"
                         # an error page's list of other errors
                         r"^(?:other|related|similar|more) (?:[\w.]+ ){0,2}(?:errors|issues|"
                         r"problems|articles|posts)\s*$"),
        # ("... and then the error occurs." tells what happened: an explainer says when; and so
        # do "the error happens specifically on the line model.generate(...)", "the error occurs
        # when I call it": the writer's own run, its line or their doing)
        ("error-means", r"\bas the (?:error )?(?:message|error) (?:suggests|says|states|"
                        r"indicates)\b|"
                        r"\b(?:this|the|that) (?:error|message|exception) (?:usually |"
                        r"typically |simply |generally )?(?:(?:means|indicates|is caused|"
                        r"is thrown|is raised|tells you|signifies)\b|(?:occurs|happens|appears)\b"
                        r"(?!\s*(?:[.!?;,)]|$|again\b|(?:\w+ )?(?:on|at|in) (?:the )?line\b|"
                        r"(?:\w+ )?(?:when|while|after|if|as soon as) (?:I|we)\b)))|"
                        r"^this (?:(?:most )?(?:often|usually|typically|mostly|commonly|"
                        r"generally) )?(?:happens|occurs)(?: (?:most )?(?:often|usually|"
                        r"typically|mostly))? when\b|"
                        r"\b(?:occurs|happens|is raised|is thrown) when (?:your|the|a|you)\b|"
                        # the message named in curly quotes between: "The “X” error signifies
                        # that", "the error message clearly indicates"
                        r"\b(?:this|the|that) (?:“[^”\n]{1,80}”\s*)?(?:error|message)(?: message)? "
                        r"(?:(?:clearly|usually|typically|simply|generally) )?(?:means|"
                        r"indicates|signifies)\b|"
                        # "the real cause is almost always that ...": a cause told in general
                        r"\bthe (?:real|root|underlying|actual) cause is (?:almost always|"
                        r"usually|typically|often|most often|generally)\b|"
                        r"を意味(?:する|します)|"
                        r"这个错误(?:的意思|表示|是指|通常)|這個錯誤(?:的意思|表示|是指|通常)|"
                        # "..., 會出現此錯誤" / "会出现此错误": when this error appears
                        r"[会會](?:出现|出現|发生|發生)(?:此|这个|這個)(?:错误|錯誤)|"
                        r"このエラーは|이 오류는|эта ошибка (?:означает|возникает)|"
                        # "... 부족해 발생하는 문제이기 때문에": a post says what causes it
                        r"(?:때문에|[서해]|하여|인해) 발생하는 (?:문제|오류|에러)|"
                        r"dieser fehler (?:bedeutet|tritt)|este error (?:significa|ocurre|aparece)|"
                        # a kind of error told in general: "NCCL timeout errors in multi-GPU
                        # setups are caused by ..."
                        r"\b(?:errors|timeouts|failures|crashes|exceptions)\b"
                        r"(?:[^.\n]|\.\d){0,80}?\bare "
                        r"(?:usually |typically |often |commonly |mostly |almost always )?"
                        r"caused by\b|"
                        r"cette erreur (?:signifie|appara[iî]t|survient)|"
                        # "El error «CUDA out of memory» significa:", "o erro ... indica"
                        r"\b(?:el|este|o) error? (?:" + _QUOTED + r"\s*)?(?:significa|"
                        r"indica)\b|"
                        # "Este erro ocorre quando", "Cette erreur se produit lorsque", "Ten błąd
                        # występuje, gdy", "Эта ошибка появляется, когда"
                        r"\b(?:este|esse) erro (?:geralmente |normalmente )?(?:ocorre|acontece|"
                        r"aparece|surge) (?:quando|porque|devido)\b|"
                        r"\bcette erreur (?:se produit|survient|appara[iî]t) (?:lorsqu|quand|"
                        r"parce)|"
                        r"\bten b[lł][aą]d (?:zwykle |zazwyczaj |najcz[eę][sś]ciej )?"
                        r"(?:wyst[eę]puje|oznacza|pojawia si[eę])\b|"
                        r"(?:эта|данная) ошибка (?:обычно |как правило )?(?:появляется|"
                        r"случается|говорит)|"
                        r"\b(?:cette|l')\s?erreur (?:" + _QUOTED + r"\s*)?(?:signifie|"
                        r"indique)\b|"
                        # Romanian: "Această eroare apare atunci când", "această eroare înseamnă"
                        r"\baceast[aă] eroare (?:de obicei |de regul[aă] )?(?:apare|[iî]nseamn[aă]|"
                        r"indic[aă]|se produce)\b|"
                        # Indonesian and Malay: "Kesalahan ini terjadi ketika", "ralat ini
                        # bermaksud"
                        r"\b(?:kesalahan|galat|ralat|error) ini (?:biasanya |umumnya )?(?:terjadi|"
                        r"muncul|berarti|bermaksud|menunjukkan|disebabkan)\b|"
                        # a reference page's sections: "What it means" as a heading, and a code
                        # defined by its number ("Xid 79 means the driver ...", "status 13
                        # indicates"); not the writer's "this means my run ..."
                        r"^\W{0,4}what (?:it|this|that)(?: (?:error|message|code|xid|event))? "
                        r"means\W{0,4}$|"
                        r"\b(?:xid|sxid|error|status|code|exit code) \d{1,3} (?:usually |"
                        r"typically |generally |always )?(?:means|indicates) (?:the|that|a|an)\b"),
        ("you-have-seen", r"\bif you(?:'re| are)? (?:ever )?(?:encounter|get|see|hit|run into|"
                          r"face|receive|getting|seeing|facing)(?:ing)? (?:this|the|that|a "
                          r"similar|such an?) (?:error|message|issue|problem|exception)\b|"
                          r"如果(?:你|您)?(?:遇到|碰到|出现)了?(?:这个|这种|此|类似的?)?(?:错误|报错|问题)|"
                          r"このエラーが(?:出た|発生した|表示された)(?:ら|場合)|"
                          r"이 (?:오류|에러)가 (?:발생하면|나면|뜨면)|"
                          # "OOM 이 발생하는 경우 ... 다음과 같은 메세지가",
                          # "OOMが発生した場合、以下のようなメッセージ", "wenn dieser Fehler
                          # auftritt"
                          r"(?:발생하는|발생할|발생한|생기는|일어나는) 경우"
                          r"[^.\n]{0,60}?다음과 같은|"
                          r"(?:発生した|発生する|起きた)場合[^。\n]{0,60}?以下のような|"
                          r"\bwenn (?:dieser|der|ein solcher) fehler auftritt\b|"
                          + _RHETORICAL + "|"
                          r"\byou(?:'ve| have)? (?:probably |likely |may have |might have |"
                          r"(?:surely |certainly )?)(?:seen|encountered|run into|hit|come across)"
                          r"\b|\bthe dreaded\b|\bmust be familiar with\b|"
                          r"\bif you(?:'ve| have)? ever (?:seen|encountered|trained|run)\b|"
                          # (not a program's pointer: "Check troubleshooting guide for common
                          # errors")
                          r"(?<!guide for )\b(?:a |one of the most )?common (?:error|problem|"
                          r"issue)s?\b|"
                          # "A classic critical Xid error is the 'fell off the bus' report"
                          r"\ba classic (?:[\w-]+ ){0,2}(?:error|failure|xid|fault)\b|"
                          # a scenario told to the reader: "You launch a week-long job on ...",
                          # "Imagine that ...": what could happen, not what did
                          r"(?:^|[.!?]\s)(?:imagine (?:that|you)\b|picture this\b|suppose "
                          r"(?:that|you)\b|you (?:start|launch|kick off|submit) an? [^.\n]{0,40}?"
                          r"\b(?:run|job)\b)|"
                          r"(?:经常|容易|常常|常会)(?:会)?(?:遇到|出现|碰到)|常见(?:的)?(?:错误|问题|报错)|よくある|"
                          r"よく遭遇|\bcommon symptoms\b|"
                          # "developers frequently encounter ...": what happens to readers
                          # (or may: "developers may encounter the following error")
                          r"\b(?:developers|users|engineers|practitioners|many people) "
                          r"(?:frequently|often|commonly|typically|regularly|may|might|can|"
                          r"sometimes) (?:encounter|hit|run into|face|see)\b|"
                          r"자주 (?:발생|보는)|"
                          r"가장 (?:많이|흔히|자주) (?:겪는|발생하는|보는|만나는)|"
                          r"흔(?:히 발생하는|한) (?:오류|에러|문제)|"
                          r"часто (?:встречается|возникает)|"
                          r"h[äa]ufig(?:er)? fehler|error (?:muy )?com[uú]n|"
                          r"erreur (?:tr[eè]s )?courante|"
                          # "el temido error" (the dreaded error), "si estás viendo este error",
                          # "no estás solo"; the same in Portuguese and French
                          r"\b(?:el|la|o|a) temid[oa]\b|\b(?:le|la) redout[ée]e?\b|"
                          r"\bsi (?:est[aá]s viendo|ves|te (?:aparece|sale)|recibes|obtienes|te "
                          r"encuentras con) (?:el|este|ese|un|una|la) (?:error|mensaje|problema)\b|"
                          r"\bno est[aá]s solo\b|"
                          r"\bse voc[eê] (?:est[aá] vendo|v[eê]|recebe|recebeu|encontrar|"
                          r"encontrou) (?:o|este|esse|um) erro\b|"
                          r"\bsi vous (?:voyez|obtenez|rencontrez) (?:cette|l'|une) ?erreur\b|"
                          # "é provável que tenha se deparado com", "il est probable que vous
                          # soyez tombé sur", "prawdopodobnie natknąłeś się na", "вы наверняка
                          # сталкивались", "Иногда возникают ошибки": the reader may have met it
                          r"\b(?:tenha|ter|j[aá]) se deparado com\b|"
                          r"\bvous (?:soyez|[êe]tes) (?:probablement |peut-[êe]tre |d[ée]j[àa] )?"
                          r"tomb[ée]e?s? sur\b|"
                          r"\bnatkn[aą][lł](?:e[sś]|a[sś]|y[sś]my)? si[eę] na\b|"
                          r"\bje[sś]li (?:zobaczysz|widzisz|otrzymasz|napotkasz) (?:ten|taki|"
                          r"podobny) (?:b[lł][aą]d|komunikat)\b|"
                          # "Самая классическая беда" (the most classic trouble), "Твоя программа
                          # падает с ..." (your program crashes with ...): the reader's case
                          r"\bсам(?:ая|ый|ое) (?:классическ|част|распространённ|распространенн|"
                          r"типичн)\w* (?:беда|ошибка|проблема|ситуация)\b|"
                          r"\b(?:твоя|ваша|твой|ваш) (?:программа|модель|скрипт|код|обучение)"
                          r" (?:падает|вылетает|крашится)\b|"
                          r"вы (?:наверняка |возможно |уже |скорее всего )?(?:сталкивались|"
                          r"видели|встречали)|"
                          r"(?:иногда|часто|нередко) (?:возникают|встречаются|бывают|появляются)"
                          r" ошибки|если вы (?:видите|получили|столкнулись с) (?:эт|так)|"
                          # Romanian: "sunt șanse să fi dat peste", "dacă vedeți această eroare"
                          r"\bs[aă] fi (?:dat peste|[iî]nt[aâ]lnit)\b|"
                          r"\bdac[aă] (?:vede[tțţ]i|primi[tțţ]i|[iî]nt[aâ]lni[tțţ]i) (?:aceast[aă]|"
                          r"o) eroare\b"),
        ("why", r"^symptoms?\s*[:：]|"
                # a short heading "Why collectives desync" (not the writer's own question)
                r"^why (?!(?:do|does|did|is|are|was|were|can|could|would|will|my|i|we)\b)"
                r"[\w-]+(?: [\w-]+){1,3}$|"
                r"^(?:why (?:it|this) happens|what (?:causes|triggers) "
                r"(?:it|this)|understanding the error|what is the .{0,60} error\b)|"
                r"\bcauses? (?:&|and) (?:fixes|solutions)\b|"
                # ("Typical error causes include:")
                r"^quick fix\b|^(?:(?:possible|common|typical|frequent|main) )?(?:error )?"
                r"causes\b|为什么会|原因[:：]|原因$|原因は|(?:常见|常見)原因|"
                r"발생 원인|причин[аы]|^common misconceptions?\s*[:：]|"
                # "Почему так? Даже если ...": a question asked and answered on one line
                r"^\W{0,4}почему так\?\s+\S[^\n]{20}|"
                # "OOM Killer 가 발생하는 원인", "OOMが発生する原因", "Ursachen": what causes it;
                # a heading that names a term to define it: "OOM Killer 란", "OOM Killerとは"
                r"(?:발생하는|생기는|일어나는) 원인|(?:発生する|起きる|起こる)原因|"
                r"^(?:m[öo]gliche |h[äa]ufige )?ursachen\b|"
                r"^[\w .()-]{0,40}[A-Za-z0-9)] ?(?:이)?란$|^[\w .()-]{0,40}[A-Za-z0-9)] ?とは$|"
                # ("🔍 Por qué ocurre este error", "Causas comunes", "Pourquoi cette erreur")
                r"^\W{0,4}(?:por qu[eé] (?:ocurre|aparece|sucede|pasa|se produce)|por que "
                r"(?:ocorre|acontece)|pourquoi (?:cette erreur|ce message|[çc]a arrive))\b|"
                r"^\W{0,4}(?:(?:as|las|les) )?caus(?:as|es) (?:comunes|principales|posibles|"
                r"comuns|poss[ií]veis|courantes|possibles|fr[ée]quentes|mais comuns)\b|"
                # Polish: "Typowe przyczyny", "Najczęstsze przyczyny błędu"
                r"^\W{0,4}(?:typowe|najcz[eę]stsze|mo[zż]liwe|g[lł][oó]wne) przyczyny\b|"
                # Romanian "Cauzele comune includ:"; Russian "Основных причин три"
                r"^\W{0,4}cauze(?:le)? (?:comune|principale|posibile|frecvente)\b|"
                r"(?:основн|главн|возможн|типичн)\w*\s+причин\b|"
                # Indonesian and Malay: "Penyebab umum meliputi:", "Punca biasa"
                r"^\W{0,4}(?:penyebab|punca) (?:umum|utama|yang mungkin|biasa|lazim)\b"),
        ("how-to-fix", r"\b(?:how to (?:fix|solve|resolve|avoid|handle|debug)|here(?:'s| is) how "
                       r"(?:to|you)|ways to (?:fix|solve|avoid|reduce)|(?:common|typical|possible) "
                       r"(?:causes|reasons|fixes|solutions)|(?:solution|fix|method|workaround) "
                       r"#?[1-9]\b|^#+\s*step [1-9]\b|"
                       r"let's (?:look|see|fix|dive|walk|break))|解决(?:方法|方案|办法)[:：]?$|"
                       r"解决方法如下|原因(?:分析|及解决)|解決(?:方法|策)|^#*\s*如何(?:修复|修復)|"
                       r"分步(?:过程|過程|指南)|対処法|해결 방법|"
                       r"트러블 ?슈팅 방법|해결할 수 있(?:다|습니다|어요)|"
                       r"способы решения|решение проблемы|l[öo]sung(?:en)?:|soluci[oó]n(?:es)?:|"
                       r"\bso (?:beheben|l[öo]sen) sie\b|"
                       r"solutions? ?:|solu[cç][aã]o:|"
                       # a numbered remedy, or a heading that offers one
                       r"^(?:\W{0,3}\d+[.)、]\s*)(?:reduce|lower|use|enable|set|increase|clear|"
                       r"free|check|add|upgrade|downgrade|restart|try|make sure|disable|limit)\b|"
                       r"^#{1,4}\s*(?:fix|solution|workaround)s?\b|(?<![求问])解决(?:方法|方案|办法)"
                       # a plain heading that offers remedies: "Workarounds — try these"
                       r"|^(?:workarounds?|solutions?|fixes)\s*(?:[—–:-]|$)"
                       r"|^fix:"
                       # a guide's title that promises a way round the failure: "How to Render
                       # Heavy Scenes Without Crashing", "how to train 70B models without
                       # running out of memory" (a question ends in its mark, and is the writer's)
                       r"|\bhow to (?:[\w-]+ ){1,5}without (?:crash\w*|running out\b|"
                       r"(?:an? |the )?(?:errors?|OOMs?|out[- ]of[- ]memory)\b)"
                       # "To resolve the worker exit error and ...": a remedy offered
                       r"|^to (?:resolve|fix|solve|avoid|prevent) (?:the|this|that|these) "
                       r"[\w -]{0,40}?\b(?:errors?|issues?|problems?|failures?)\b"
                       # Spanish, Portuguese, French: "cómo solucionar", "7 soluciones que
                       # funcionan", "formas de arreglarlo", "como corrigir", "comment corriger"
                       r"|\bc[oó]mo (?:solucionar|arreglar|resolver|corregir|evitar)\b"
                       # a guide's title or summary that offers the fix: "Solucionar errores de
                       # memoria ...", "Resuelve errores OOM al entrenar ..."
                       r"|^\W{0,4}(?:solucionar|solucion[ae]|resolver|resuelve|arreglar|arregla|"
                       r"corregir|corrige|evitar|evita) (?:(?:los|las|el|la|tus|sus) )?"
                       r"(?:errores|problemas|fallos)\b"
                       r"|\bsoluciones (?:que funcionan|r[aá]pidas|probadas|comunes|posibles|"
                       r"avanzadas)\b|\b(?:formas|maneras) (?:probadas )?de (?:arreglar|"
                       r"solucionar|resolver)\w*"
                       r"|\bcomo (?:corrigir|resolver|solucionar|consertar) (?:o|este|esse) erro\b"
                       r"|\bcomment (?:corriger|r[ée]soudre|r[ée]parer|[ée]viter) (?:cette|l')"
                       r" ?erreur\b"
                       # a guide's title ("Como corrigir “...”", "Comment réparer « ... »",
                       # "Jak naprawić błąd", "Как исправить ошибку") and its steps ("passo a
                       # passo", "étape par étape", "krok po kroku"); "это лечится": it is cured by
                       r"|^(?:como (?:corrigir|resolver|consertar)|comment (?:corriger|r[ée]soudre"
                       r"|r[ée]parer)|jak (?:naprawi[cć]|rozwi[aą]za[cć]|usun[aą][cć])|как "
                       r"(?:исправить|решить|устранить))\b"
                       r"|\b(?:passo a passo|[ée]tape par [ée]tape|krok po kroku)\b"
                       r"|(?:это|проблема) (?:обычно )?(?:лечится|решается|исправляется)"
                       # Romanian "Cum se remediază ...", "pas cu pas"; Russian "решение ошибки"
                       r"|^\W{0,4}cum (?:se |s[aă] )?(?:remedia|rezolv|repar|corect)\w*\b"
                       r"|\bpas cu pas\b|\bрешение ошибки\b"
                       # Indonesian and Malay: "Cara Memperbaiki ...", "langkah demi langkah"
                       r"|\bcara (?:memperbaiki|mengatasi|menyelesaikan|membetulkan)\b"
                       r"|\blangkah demi langkah\b"
                       # an error page's list of what not to try ("Dead ends", "What doesn't
                       # work"): remedies weighed for every reader
                       r"|^\W{0,4}(?:dead[- ]ends?|what (?:doesn'?t|does not|won'?t) (?:work|help)|"
                       r"what not to (?:try|do))\b|\bdo not try th(?:ese|is)\b"
                       # a reference page's steps: "How to diagnose it", "What to do" as a
                       # heading (not the writer's "I don't know what to do")
                       r"|\bhow to (?:diagnose|troubleshoot|investigate) (?:it|this|that|the)\b"
                       # a guide's title that promises the way out, or asks what sets it off
                       # for every reader: "(And How to Prevent It)", "What triggers the
                       # OOM-Killer during AI training?"
                       r"|\(?\band how to (?:prevent|avoid|fix|stop|solve) (?:it|them|this|that)\b"
                       r"|^\W{0,4}what (?:triggers|causes) (?:the |an? )?[\w-]+"
                       r"|^\W{0,4}what to do(?: (?:about it|next|when it happens))?\W{0,4}$"),
        # a documentation page that shows what a log line looks like: "These logs are in the
        # following format:", "The event log looks like this:", "Typical kernel-log signature";
        # a writer's own paste says "I get this error:", not what a log's lines look like
        ("log-format", r"\b(?:these|the|its|each|every) (?:[\w-]+ ){0,3}(?:logs?|log lines?|"
                       r"entr(?:y|ies)|events?|messages?) (?:are|is) (?:written |printed "
                       r")?in the following format\b|"
                       r"\bthe (?:[\w-]+ ){0,3}(?:log|log line|log entry|event log|kernel log|"
                       r"message|entry|record) (?:looks|will look|would look) like this\b|"
                       r"^\W{0,4}(?:typical|example|sample) (?:[\w-]+ ){0,2}(?:signature|log "
                       r"lines?|log entry|log output)\W{0,4}$"),
    ))
EXPLAINER_MIN_CUES = 2
# The reporter's question without its question mark: "how to fix this".
_ASKED = re.compile(r"^(?:so |but |pls |please )?how (?:to|do i|can i|could i|should i) "
                    r"(?:fix|solve|resolve|avoid|handle|debug) (?:this|it|that)\b.{0,20}$",
                    re.IGNORECASE)


# ... and inside a longer sentence: "I don't know how to fix it" asks, it does not explain.
_ASKED_INLINE = re.compile(
    r"\b(?:(?:do not|don'?t|didn'?t|did not|doesn'?t)\s+(?:\w+\s+)?(?:know|kown|konw|"
    r"understand)|no idea|not sure|wonder(?:ing)?|(?:want|like|need) to know)\s+how to (?:fix|"
    r"solve|resolve|avoid|handle|debug)\b|"
    # "please tell me how to solve it? thanks a lot!": a request to be told, before a sign-off
    r"\b(?:please|pls|plz|can you|could you|would you)\s+(?:tell|telle|show|teach)\s+(?:me|us)"
    r"\s+how to (?:fix|solve|resolve|avoid|handle|debug)\b|"
    # "no sé cómo solucionarlo", "não sei como resolver", "je ne sais pas comment corriger"
    r"\bno (?:s[eé]|sabemos|entiendo) c[oó]mo \w+|\bn[aã]o (?:sei|sabemos) como \w+|"
    r"\bsab(?:e|es|en|éis) c[oó]mo \w+|\balgu[eé]m sabe como \w+|"
    r"\bne sais pas comment \w+", re.IGNORECASE)


# "It seems this error occurs when the target is 1000", "Maybe this error happens because ...":
# a guess at what caused the writer's own failure, not an explanation of an error in general.
_GUESSED = re.compile(r"^(?:it (?:seems?|looks like)|seems? (?:like|that)|i (?:think|guess|suspect|"
                      r"believe)|maybe|perhaps|probably)\b", re.IGNORECASE)


# A question in Chinese without its question mark: it opens by asking ("想问一下", "请问") or
# ends on a question particle ("吗", "呢").
_QUESTION_UNMARKED = re.compile(r"^[>\s]*(?:想问|请问|问一下|想请教|请教一下|求问)|[吗嗎呢]$")


def explainer_cues(lines: list[str]) -> set[str]:
    """The kinds of explainer phrase found in ``lines`` (see :data:`EXPLAINER_MIN_CUES`)."""
    found = set()
    for line in lines:
        # (a question set in bold or as a heading is still a question: "### **How to ...?**")
        stripped = line.strip().rstrip("*_` ")
        if not stripped or _ASKED.match(stripped) or _GUESSED.match(stripped):
            continue
        # a question is the reporter's: "how to fix this?" (in Chinese also without its mark:
        # "想问一下 ... 还是什么原因")
        if stripped.endswith(("?", "？")) or _QUESTION_UNMARKED.search(stripped):
            if _RHETORICAL_QUESTION.search(stripped):  # ... unless it asks the reader
                found.add("you-have-seen")
            continue
        stripped = _ASKED_INLINE.sub(" ", stripped)
        found.update(key for key, pattern in _EXPLAINER_CUES if pattern.search(stripped))
    return found


_HANDLERS: dict[str, tuple[re.Pattern[str], ...]] = {}
for _sig in SIGNATURES:
    if _sig.handles:
        _HANDLERS.setdefault(_sig.handles, ())
        _HANDLERS[_sig.handles] += (_sig.regex,)


_HANDLED_WITHIN = 2  # lines after a failure that may say it was caught


def handled_in(cls: str, text: str, after: int, candidate: Candidate | None = None) -> bool:
    """Does ``text`` after position ``after`` (or one of the next lines) say that the failure
    of class ``cls`` was caught and the program went on?"""
    patterns = _HANDLERS.get(cls, ())
    if not patterns:
        return False
    rest = [text[after:]]
    if candidate is not None:
        rest.extend(line for _, line in candidate.after[:_HANDLED_WITHIN])
    return any(pattern.search(part) for pattern in patterns for part in rest)
