"""Texts that quote failures in Spanish, Portuguese, French, Polish and Russian explainers and in a
book's chapter; a pull request known by its checklist and closing keyword; a batch-size search
that catches its out-of-memories; a message in a string literal of code; the OOM killer in
capitals mid-log; lspci's "(rev ff)" for a GPU off the bus. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import OWN_RUN, read_head
from gpu_audit.explain.mentions import explainer_cues
from gpu_audit.model import Severity
from tests.explain.helpers import SHAPES
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(name: str):  # type: ignore[no-untyped-def]
    return [i for i in incidents(name) if i.is_failure]


@pytest.mark.parametrize("name", [
    "explainer_guide_es.log",  # "en esta guía", "por qué ocurre", "el error ... significa"
    "explainer_dreaded_error_es.log",  # one phrase ("el temido error"), nobody met it
    "explainer_guide_pt.log",  # "neste guia", "como resolver este erro", "o erro ... indica"
    "explainer_guide_fr.log",  # "dans ce guide", "cette erreur signifie"
    "explainer_device_assert_pt.log",  # "se deparado com", "este erro ocorre quando"
    "explainer_device_assert_fr.log",  # "vous êtes tombé sur", "les causes courantes"
    "explainer_device_assert_pl.log",  # "natknąłeś się na", "ten błąd występuje"
    "explainer_cudnn_settings_ru.log",  # "если вкратце", "иногда возникают ошибки"
    "explainer_book_chapter.log",  # "This chapter gives you ...": a book's made-up incident
    "pr_closing_keyword_nvml_not_supported.log",  # "Fixes #4021", "This PR only changes ..."
    "oom_batch_size_search_probes.log",  # "Batch size 16 failed, trying batch size 8"
    "code_snippet_retries_oom.log",  # the message in literals that code tests, logs, raises
])
def test_quoted_or_handled_failures_raise_no_error(name: str) -> None:
    assert failures(name) == [], [(i.signature, i.title) for i in failures(name)]


@pytest.mark.parametrize(("name", "kinds"), [
    ("explainer_guide_es.log", {"this-article", "you-have-seen", "why", "error-means"}),
    ("explainer_dreaded_error_es.log", {"you-have-seen"}),
    ("explainer_guide_pt.log", {"this-article", "how-to-fix", "error-means"}),
    ("explainer_guide_fr.log", {"this-article", "how-to-fix", "error-means"}),
    ("explainer_book_chapter.log", {"this-article"}),
    ("explainer_device_assert_pt.log", {"how-to-fix", "you-have-seen", "error-means", "why"}),
    ("explainer_device_assert_fr.log", {"how-to-fix", "you-have-seen", "error-means", "why"}),
    ("explainer_device_assert_pl.log", {"how-to-fix", "you-have-seen", "error-means", "why"}),
    ("explainer_cudnn_settings_ru.log", {"this-article", "you-have-seen", "how-to-fix"}),
])
def test_explainer_phrases_in_other_languages(name: str, kinds: set[str]) -> None:
    lines = (SHAPES / name).read_text(encoding="utf-8").splitlines()
    assert kinds <= explainer_cues(lines)


def test_a_spanish_report_with_its_own_run_stays_a_failure() -> None:
    # "cuando ejecuto ... me sale este error" is the writer's run; "no sé cómo solucionar"
    # asks, it does not explain
    found = root("report_es_own_run_one_cue.log")
    assert (found.cls, found.severity) == ("cuda-oom", Severity.ERROR)
    assert explainer_cues(["No sé cómo solucionar este error, ¿alguna idea? Con lote 16 va.",
                           "Alguien sabe cómo solucionar este error con dos tarjetas",
                           "Alguém sabe como resolver este erro no treino"]) == set()


@pytest.mark.parametrize("line", [
    "Cuando ejecuto el script me sale este error",
    "Estoy entrenando un modelo con dos tarjetas",
    "Estou treinando com lote 32 e recebi este erro",
    "J'ai cette erreur quand je lance l'entraînement",
])
def test_first_person_words_in_spanish_portuguese_and_french(line: str) -> None:
    assert OWN_RUN.search(line)


@pytest.mark.parametrize("text", [
    "Quieter NVML errors\n\nFixes #4021\n",
    "Quieter NVML errors\n\n- [ ] This PR only changes documentation.\n",
])
def test_a_pull_request_body_is_known_by_its_closing_keyword_or_checklist(text: str) -> None:
    assert read_head(text.encode(), whole=True).pull_request


def test_an_issue_that_mentions_a_fix_in_a_sentence_is_no_pull_request() -> None:
    text = "Training dies with an NVML error\n\nI think this fixes #4021 too, not sure.\n"
    assert not read_head(text.encode(), whole=True).pull_request


def test_a_batch_size_search_whose_last_probe_fails_still_fails() -> None:
    found = root("oom_batch_size_search_last_probe_fails.log")
    assert (found.cls, found.severity) == ("cuda-oom", Severity.ERROR)


def test_a_caught_search_probe_is_kept_as_a_warning() -> None:
    (oom,) = [i for i in incidents("oom_batch_size_search_probes.log") if i.cls == "cuda-oom"]
    assert oom.severity == Severity.WARNING and "caught it" in oom.explanation


def test_the_oom_killer_named_in_capitals_mid_log_is_read() -> None:
    found = root("oom_killer_in_capitals_mid_log.log")
    assert (found.cls, found.signature, found.line_numbers) == (
        "host-oom", "host-oom/kernel-oom-killer", [4])


def test_lspci_rev_ff_is_a_gpu_off_the_bus() -> None:
    found = root("lspci_gpu_rev_ff.log")
    assert (found.cls, found.signature, found.severity) == (
        "gpu-hardware", "gpu-hardware/lspci-rev-ff", Severity.CRITICAL)
    assert found.numbers.get("pci_bus_id") == "5e:00"
    assert found.line_numbers == [7]


@pytest.mark.parametrize("line", [
    'If I run it with batch 32 I get "CUDA out of memory" after a few steps',
    'While training on two GPUs, "CUDA out of memory" appears at step 300',
    'In my case "CUDA out of memory" shows up after 3 epochs',
    'level=error msg="CUDA out of memory. Tried to allocate 2.00 GiB"',
    '{"level": "error", "msg": "CUDA out of memory. Tried to allocate 2.00 GiB"}',
    "Error: RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')",
])
def test_a_quoted_message_in_a_report_or_a_structured_log_line_is_no_code(line: str) -> None:
    found = classify_text(line, torch_version=None)
    assert [i.cls for i in found if i.is_failure] == ["cuda-oom"]
