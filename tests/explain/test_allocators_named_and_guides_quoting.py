"""A host allocator named without its size in a title, Jittor's own memory check, and guides
that quote a message in curly quotes or answer it in Spanish. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_cpu_allocator_named_in_a_title_without_its_size() -> None:
    found = root("cpu_allocator_named_in_title.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/cpu-allocator")
    assert found.locations[0].line == 2


def test_jittors_memory_check_is_the_root_before_its_illegal_address_fallout() -> None:
    found = root("jittor_memory_overflow_then_illegal_address.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert found.numbers["framework"] == "jittor"


def test_an_explainer_quoting_in_curly_quotes_raises_no_failure() -> None:
    assert not [i for i in incidents("explainer_curly_quoted_scheduler_limit.log")
                if i.is_failure]


def test_a_spanish_guide_with_a_quick_answer_raises_no_failure() -> None:
    assert not [i for i in incidents("explainer_quick_answer_es.log") if i.is_failure]


# --- failures told by their cause or their cure -------------------------------------------------

def test_a_card_moved_to_other_slots_and_working_is_the_slots_fault() -> None:
    found = root("thread_slot_riser_told.log")
    assert (found.cls, found.signature) == ("gpu-hardware", "gpu-hardware/slot-told")


def test_advice_about_risers_and_slots_is_no_telling() -> None:
    assert not [i for i in incidents("advice_try_another_slot.log") if i.is_failure]


def test_a_machine_restarting_when_a_heavier_mode_is_enabled() -> None:
    found = root("thread_title_reboot_when_enabling_mode.log")
    assert found.signature == "gpu-hardware/power-loss-told"


def test_vram_use_too_large_to_train_told_in_chinese() -> None:
    found = root("thread_title_vram_use_too_large_zh.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/memory-told")


def test_a_program_that_ran_only_with_the_async_backend_off() -> None:
    found = root("thread_title_works_only_with_async_off.log")
    assert found.signature == "alloc-conf/async-fails-told"


def test_the_async_backend_off_in_a_condition_is_no_telling() -> None:
    assert not [i for i in incidents("advice_disable_async_in_a_condition.log") if i.is_failure]


def test_a_job_that_ran_once_given_more_memory_was_killed_for_memory() -> None:
    found = root("thread_more_memory_and_it_ran.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/killed-for-memory-told")


def test_more_memory_in_a_condition_is_no_telling() -> None:
    assert not [i for i in incidents("advice_give_more_memory.log") if i.is_failure]


def test_the_ram_told_climbing_past_a_figure_then_crashing() -> None:
    found = root("thread_ram_climbs_past_figure_crash.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/ram-full-told")


# --- a notebook's kernel that died -----------------------------------------------------------

def test_a_notebook_kernel_restarted_by_its_server_is_read_as_host_memory() -> None:
    found = root("notebook_runtime_kernel_restarted.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/notebook-kernel-restarted")


def test_an_error_printed_before_the_kernel_restart_stays_the_root() -> None:
    found = root("notebook_cuda_oom_then_kernel_restarted.log")
    assert found.cls == "cuda-oom"


# --- a kernel fault shortened ----------------------------------------------------------------

def test_an_illegal_cuda_error_named_in_a_title_is_a_kernel_fault() -> None:
    found = root("thread_title_illegal_cuda_error_cut.log")
    assert (found.cls, found.signature) == ("illegal-memory-access", "illegal-memory-access/told")


def test_an_illegal_cuda_error_in_a_condition_is_no_telling() -> None:
    assert not [i for i in incidents("advice_illegal_cuda_error_condition.log") if i.is_failure]
