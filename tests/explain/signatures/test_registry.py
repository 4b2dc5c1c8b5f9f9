"""The rules every signature obeys: advice, a documented class, an example, a place in the order."""

from __future__ import annotations

import re

import pytest

from gpu_audit.explain.classify import match_signature
from gpu_audit.explain.signatures import (
    CLASS_DOCS,
    CLASSES,
    ORDER,
    SIGNATURE_BY_ID,
    SIGNATURES,
    AdviceContext,
    CatalogueError,
    Signature,
    registry,
)


def _unadvised(sig_id: str = "driver-mismatch/made-up") -> Signature:
    return Signature(sig_id, sig_id.split("/")[0], re.compile("made up"), ("made up",),
                     "A made-up failure", advisor=None, example="made up")


def test_a_signature_without_advice_is_refused() -> None:
    with pytest.raises(CatalogueError, match="has no advice"):
        registry.register(_unadvised())
    with pytest.raises(CatalogueError, match="has no advice"):
        registry.fixed("driver-mismatch/made-up", "made up", ("made up",), "A made-up failure",
                       example="made up", explanation="Something broke.", remedy=" ")
    assert "driver-mismatch/made-up" not in registry._REGISTERED


def test_a_signature_of_an_undocumented_or_unknown_class_is_refused() -> None:
    with pytest.raises(CatalogueError, match="not documented"):
        registry.register(_unadvised("disk-full/enospc"))
    with pytest.raises(CatalogueError, match="unknown failure class"):
        registry.document_class("disk-full", "Disk full.\n\nThe disk filled up.")
    with pytest.raises(CatalogueError, match="summary line and a paragraph"):
        registry.document_class("nccl", "NCCL.")


def test_the_match_order_names_every_signature_exactly_once() -> None:
    assert [sig.id for sig in SIGNATURES] == list(ORDER)
    with pytest.raises(CatalogueError, match="leaves out"):
        registry.in_order(ORDER[:-1])
    with pytest.raises(CatalogueError, match="unregistered"):
        registry.in_order((*ORDER, "nccl/made-up"))


def test_every_class_is_documented_and_has_signatures() -> None:
    assert list(CLASS_DOCS) == list(CLASSES)
    for cls, doc in CLASS_DOCS.items():
        assert doc.summary.endswith(".") and len(doc.body) > 200, cls
        assert any(sig.cls == cls for sig in SIGNATURES), cls


@pytest.mark.parametrize("sig_id", ORDER)
@pytest.mark.parametrize("torch_version", [None, "2.0.1", "2.10.0"])
def test_every_signature_reads_its_example_and_says_why_and_what_to_do(
        sig_id: str, torch_version: str | None) -> None:
    sig = SIGNATURE_BY_ID[sig_id]
    found = match_signature(sig.example)
    assert found is not None and found[0] is sig, f"{sig_id}'s example matches {found}"
    numbers = sig.extract(found[1], sig.example) if sig.extract else {}
    advice = sig.advise(numbers, AdviceContext(torch_version))
    assert advice.title.strip() and advice.explanation.strip() and advice.remedy.strip()
