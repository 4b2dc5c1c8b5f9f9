"""The reference text of explain's failure classes and signatures, for ``gpu-audit rules``.

Everything here is read from the catalogue itself: a class's text is its module's docstring,
and a signature's explanation and remedy are what its own advice says about its example line
(for a torch version that is not known, so remedies name every variable). The texts cannot drift
from what ``gpu-audit explain`` prints.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from gpu_audit.explain.signatures import (
    CLASS_DOCS,
    RENAMED,
    SIGNATURES,
    TIERS,
    Advice,
    AdviceContext,
    ClassDoc,
    Signature,
)

SECTION = "Explain signatures (gpu-audit explain)"
_WIDTH = 100  # terminal text is wrapped like the rules' docstrings


def _intro() -> str:
    tiers = "; ".join(f"{tier}: {meaning}" for tier, meaning in TIERS)
    return textwrap.fill(
        "`gpu-audit explain` reads logs and recognises the failure messages below. Each belongs "
        "to a failure class (the `class` of an incident in its JSON output); within a class the "
        "signatures are listed in the order they are tried on a line, and the first that matches "
        "wins. Incidents are shown root cause first: by severity, then by tier "
        f"({tiers}). The explanation and remedy shown for each signature are those `gpu-audit "
        "explain` gives for its example line; for a real log they use the numbers in it.",
        _WIDTH, break_on_hyphens=False, break_long_words=False) + "\n"


def signatures_of(cls: str) -> list[Signature]:
    """The signatures of class ``cls``, in the order they are tried."""
    return [sig for sig in SIGNATURES if sig.cls == cls]


def is_continuation(sig: Signature) -> bool:
    """A line that only adds numbers to an incident opened by another line."""
    return sig.attach == "only"


def severity_text(sig: Signature) -> str:
    return "-" if is_continuation(sig) else sig.severity.value


def example_advice(sig: Signature) -> Advice | None:
    """What ``gpu-audit explain`` says about the signature's example line (None: continuation)."""
    if is_continuation(sig):
        return None
    match = sig.regex.search(sig.example)
    if match is None:  # the catalogue's tests keep every example matching its own signature
        raise ValueError(f"{sig.id}: the example does not match its regex")
    numbers = sig.extract(match, sig.example) if sig.extract else {}
    return sig.advise(numbers, AdviceContext(torch_version=None))


def _continuation_note(sig: Signature) -> str:
    return (f"A continuation line: it adds its numbers to the latest `{sig.cls}` incident within "
            f"{sig.window} lines, and is never an incident of its own.")


def find(name: str) -> ClassDoc | Signature | None:
    """The class or signature called ``name`` (or once called it: see :data:`RENAMED`)."""
    if name in CLASS_DOCS:
        return CLASS_DOCS[name]
    name = RENAMED.get(name, name)
    return next((sig for sig in SIGNATURES if sig.id == name), None)


def names() -> list[str]:
    """Every class id and signature id, for lookups and suggestions."""
    return [*CLASS_DOCS, *(sig.id for sig in SIGNATURES)]


# --- terminal -----------------------------------------------------------------------------------

def render_list() -> str:
    """One line per class, and below it one per signature: id, severity, title."""
    width = max(len(sig.id) for sig in SIGNATURES) + 4
    lines = [f"{'EXPLAIN CLASS / SIGNATURE':<{width}}{'SEVERITY':<10}TITLE"]
    for cls, doc in CLASS_DOCS.items():
        lines.append(f"{cls}: {doc.summary}")
        for sig in signatures_of(cls):
            lines.append(f"  {sig.id:<{width - 2}}{severity_text(sig):<10}{sig.title}")
    return "\n".join(lines) + "\n"


def render_signature_list(cls: str) -> str:
    """The signatures of class ``cls``, one line each, in the order they are tried."""
    lines = ["Signatures, in the order they are tried:"]
    width = max(len(sig.id) for sig in signatures_of(cls)) + 2
    lines += [f"  {sig.id:<{width}}{severity_text(sig):<10}{sig.title}"
              for sig in signatures_of(cls)]
    return "\n".join(lines) + "\n"


def render_one(item: ClassDoc | Signature) -> str:
    if isinstance(item, ClassDoc):
        lines = [f"{item.id} - failure class of gpu-audit explain", "", item.summary, "",
                 item.body, ""]
        return "\n".join(lines) + "\n" + render_signature_list(item.id)
    sig = item
    lines = [f"{sig.id} ({severity_text(sig)}) - signature of class {sig.cls}, tier {sig.tier}",
             "", sig.title, "", "Example:", f"  {sig.example}"]
    advice = example_advice(sig)
    if advice is None:
        lines += ["", _wrap(_continuation_note(sig))]
    else:
        lines += ["", _wrap(f"Why: {advice.explanation}", "     "), "Fix:"]
        lines += [f"  {line}" if line.startswith("export ") else _wrap(line, "    ", "  ")
                  for line in advice.remedy.splitlines()]  # an export line is pasted whole
    return "\n".join(lines) + "\n"


def _wrap(text: str, indent: str = "", first: str = "") -> str:
    return textwrap.fill(text, _WIDTH, initial_indent=first, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False)


# --- markdown -----------------------------------------------------------------------------------

def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _class_heading(cls: str) -> str:
    return f"Class `{cls}`"


def render_markdown(only: ClassDoc | Signature | None = None) -> str:
    """The explain part of the reference page: an index table, then each class and signature
    (with ``only``: that class, or that signature, alone)."""
    if only is None:
        lines = [f"## {SECTION}", "", _intro(), "| signature | severity | title |",
                 "|---|---|---|"]
        for cls, doc in CLASS_DOCS.items():
            summary = doc.summary.replace("|", "\\|")
            lines.append(f"| [**`{cls}`**](#{anchor(_class_heading(cls))}) | | {summary} |")
            for sig in signatures_of(cls):
                title = sig.title.replace("|", "\\|")
                lines.append(f"| [`{sig.id}`](#{anchor(f'`{sig.id}`')}) | {severity_text(sig)} "
                             f"| {title} |")
    else:
        lines = []
    for cls, doc in CLASS_DOCS.items():
        if isinstance(only, Signature):
            lines += _signature_markdown(only) if only.cls == cls else []
            continue
        if only is not None and only.id != cls:
            continue
        lines += ["", f"### {_class_heading(cls)}", "", doc.summary, "", doc.body]
        for sig in signatures_of(cls):
            lines += _signature_markdown(sig)
    return "\n".join(lines).lstrip("\n") + "\n"


def _signature_markdown(sig: Signature) -> list[str]:
    lines = ["", f"#### `{sig.id}`", "",
             f"**Severity:** {severity_text(sig)} · **tier:** {sig.tier}", "", sig.title, "",
             "```text", sig.example, "```"]
    advice = example_advice(sig)
    if advice is None:
        return [*lines, "", _continuation_note(sig)]
    lines += ["", f"**Why:** {advice.explanation}", "", "**Fix:**"]
    for line in advice.remedy.splitlines():
        lines += ["", f"`{line}`" if line.startswith("export ") else line]
    return lines


# --- JSON ---------------------------------------------------------------------------------------

def signature_document(sig: Signature) -> dict[str, Any]:
    advice = example_advice(sig)
    return {
        "id": sig.id, "class": sig.cls, "title": sig.title,
        "severity": None if is_continuation(sig) else sig.severity.value, "tier": sig.tier,
        "continuation": is_continuation(sig), "needles": list(sig.needles),
        "example": sig.example,
        "explanation": advice.explanation if advice else None,
        "remedy": advice.remedy if advice else None,
    }


def document(only: ClassDoc | Signature | None = None) -> list[dict[str, Any]]:
    """Every class with its signatures (or just ``only``'s), as ``gpu-audit rules --json``."""
    out = []
    for cls, doc in CLASS_DOCS.items():
        members = signatures_of(cls)
        if isinstance(only, ClassDoc) and only.id != cls:
            continue
        if isinstance(only, Signature):
            if only.cls != cls:
                continue
            members = [only]
        out.append({"class": cls, "summary": doc.summary, "doc": doc.body,
                    "signatures": [signature_document(sig) for sig in members]})
    return out
