"""A machine that powers off, restarts or goes dark under GPU load, told in a thread's title
(no message is printed for it), and the same words as advice, which name nothing. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain.signatures import SIGNATURES
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root

_TOLD = next(sig for sig in SIGNATURES if sig.id == "gpu-hardware/power-loss-told")


@pytest.mark.parametrize("name", ["power_loss_title_pc.log", "power_loss_title_zh.log"])
def test_a_machine_going_off_under_load_named_in_a_title(name: str) -> None:
    told = root(name)
    assert (told.cls, told.signature) == ("gpu-hardware", "gpu-hardware/power-loss-told")
    assert "nvidia-smi -pl" in told.remedy and "power supply" in told.remedy


def test_the_same_words_as_advice_name_nothing() -> None:
    assert not [i for i in incidents("power_loss_advice_title.log") if i.is_failure]


@pytest.mark.parametrize(("line", "told"), [
    ("PC shuts down during an iteration", True),
    ("Machine restarts when running the training script", True),
    ("The power is cut off after 20 training sessions.", True),
    ("Single card shutdowns computer during training", True),
    # a noun, a condition, no load
    ("The system reboot is required after the driver update", False),
    ("If the machine restarts when training, check the PSU", False),
    ("the screen goes black when the driver resets", False),
])
def test_power_loss_wordings(line: str, told: bool) -> None:
    assert bool(_TOLD.regex.search(line)) is told
