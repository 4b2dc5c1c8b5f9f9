"""The arithmetic of an out-of-memory, done once (``knowledge/oom.py``) and told the same way by
``explain`` and ``snapshot``: memory held elsewhere, whether freeing it would fit the request,
whether the cache's unallocated bytes plus the free memory would, and who holds the rest."""

from __future__ import annotations

from gpu_audit.explain import classify_text
from gpu_audit.explain.scanner import BlockScanner
from gpu_audit.knowledge.oom import budget_sentences, diagnose_oom, oom_budget, oom_numbers
from gpu_audit.units import fmt_bytes
from tests.explain.helpers import fixture_incidents, gib, mib

# A 4 GB card with three stray servers on it: the request does not fit the free memory, the
# cache's unallocated bytes alone do not hold it either, and 0.6 GiB is held elsewhere.
SHARED_CARD = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
    "capacity of 3.81 GiB of which 201.12 MiB is free. Including non-PyTorch memory, this "
    "process has 3.01 GiB memory in use. Of the allocated memory 2.47 GiB is allocated by "
    "PyTorch, and 412.55 MiB is reserved by PyTorch but unallocated.")


def test_memory_held_elsewhere_is_total_minus_free_minus_this_process() -> None:
    numbers = oom_numbers(SHARED_CARD)
    assert numbers["held_elsewhere_bytes"] == gib(3.81) - mib(201.12) - gib(3.01)
    assert round(numbers["held_elsewhere_bytes"] / 2**30, 1) == 0.6
    assert numbers["shortfall_bytes"] == mib(512) - mib(201.12)


def test_what_would_have_fitted() -> None:
    budget = oom_budget(oom_numbers(SHARED_CARD))
    assert budget.cache_alone_fits is False  # 412.55 MiB is not enough for 512 MiB
    assert budget.fits_in_cache_and_free is True  # 412.55 + 201.12 MiB is
    assert budget.fits_if_elsewhere_freed is True
    assert budget.elsewhere_is_others is True
    assert diagnose_oom(oom_numbers(SHARED_CARD)) == "other-processes"


def test_explain_never_calls_the_cache_enough_on_its_own() -> None:
    (oom,) = classify_text(SHARED_CARD, torch_version="2.3.1")
    assert oom.diagnosis == "other-processes"
    assert "618.08 MiB was held outside this process" in oom.explanation
    assert "with it freed the request would have fitted" in oom.explanation
    assert "412.55 MiB reserved but unallocated, less than the request on its own" in (
        oom.explanation)
    assert "613.67 MiB, enough" in oom.explanation
    assert "enough for the request" not in oom.explanation
    assert "expandable_segments:True" in oom.remedy and "gpu-audit scan" in oom.remedy


def test_a_job_too_big_says_neither_freeing_nor_defragmenting_would_fit() -> None:
    text = SHARED_CARD.replace("512.00 MiB", "2.00 GiB")
    numbers = oom_numbers(text)
    assert diagnose_oom(numbers) == "too-large"
    said = " ".join(budget_sentences(numbers, fmt_bytes))
    assert "even with it freed the request would not have fitted" in said
    assert "defragmenting the cache alone would not help" in said


def test_the_cache_alone_can_be_enough() -> None:
    text = ("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; "
            "5.00 GiB already allocated; 5.12 MiB free; 7.70 GiB reserved in total by PyTorch)")
    numbers = oom_numbers(text)
    assert diagnose_oom(numbers) == "fragmentation"
    said = " ".join(budget_sentences(numbers, fmt_bytes))
    assert "on its own enough for the request" in said


def test_processes_an_nvidia_smi_table_names_are_said() -> None:
    table = (
        "| Processes:                                                                  |\n"
        "|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |\n"
        "|=============================================================================|\n"
        "|    0   N/A  N/A      2211      C   python serve_a.py                  206MiB |\n"
        "|    0   N/A  N/A      2212      C   python serve_b.py                  206MiB |\n"
        "|    0   N/A  N/A      4410      C   python train.py                   3082MiB |\n"
        "+-----------------------------------------------------------------------------+\n")
    filler = "".join(f"step {n}: loss 0.1\n" for n in range(20))  # the table is not in the tail
    (oom,) = classify_text(table + filler + SHARED_CARD, torch_version="2.3.1")
    assert "pid 2211 python serve_a.py 206.00 MiB" in oom.explanation
    assert "pid 4410" not in oom.explanation  # the job itself


def test_every_row_of_a_long_nvidia_smi_table_is_read() -> None:
    (oom,) = fixture_incidents("shapes/nvidia_smi_long_process_table.log")
    held = {p["pid"] for p in oom.numbers["gpu_processes"]}
    assert held == set(range(3101, 3112))  # eleven servers; the job itself (4410) left out


def test_rows_of_the_table_format_before_gpu_instances() -> None:
    table = ("| Processes:                                                       GPU Memory |\n"
             "|  GPU       PID   Type   Process name                             Usage      |\n"
             "|=============================================================================|\n"
             "|    0      2211      C   python serve_a.py                            206MiB |\n"
             "+-----------------------------------------------------------------------------+\n")
    filler = "".join(f"step {n}: loss 0.1\n" for n in range(20))
    (oom,) = classify_text(table + filler + SHARED_CARD, torch_version="2.3.1")
    assert "pid 2211 python serve_a.py 206.00 MiB" in oom.explanation


def test_a_table_is_read_to_its_end_however_the_stream_is_cut() -> None:
    rows = "".join(f"|    0   N/A  N/A  {5000 + n:8d}      C   python w{n}.py   100MiB |\n"
                   for n in range(300))
    text = ("| Processes:                                                     |\n" + rows
            + "+----------------------------------------------------------------+\n"
            + "|    1   N/A  N/A      9999      C   python not_in_a_table.py   100MiB |\n")
    data = text.encode()
    for size in (1, 977, len(data)):
        scanner = BlockScanner()
        found = [c for start in range(0, len(data), size)
                 for c in scanner.feed(data[start:start + size])]
        found += list(scanner.finish(tail=False))
        pids = [c.text.split()[4] for c in found if c.text.startswith("|    ")]
        assert pids == [str(5000 + n) for n in range(300)], size


def test_a_worker_starting_inside_a_table_reads_its_rows() -> None:
    before = b"| Processes:           |\n|    0   N/A  N/A  5000  C  python a.py  100MiB |\n"
    scanner = BlockScanner(before=before)
    found = list(scanner.feed(b"|    0   N/A  N/A  5001  C  python b.py  100MiB |\nstep 1\n"
                              + b"x\n" * 10))
    found += list(scanner.finish(tail=False))
    assert [c.line for c in found] == [1]
