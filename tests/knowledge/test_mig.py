"""The command that turns MIG off is written once, in gpu_audit.knowledge.mig."""

from __future__ import annotations

from pathlib import Path

from gpu_audit.knowledge.mig import MIG_OFF_NEEDS, mig_off_command
from gpu_audit.rules.health import mig_enabled
from tests.rules.test_health import h100, node, run

RULES = Path(__file__).resolve().parents[2] / "gpu_audit" / "rules"


def test_the_mig_off_command_names_the_gpu():
    assert mig_off_command(3) == "sudo nvidia-smi -i 3 -mig 0"


def test_the_mig_enabled_rule_takes_its_remedy_from_knowledge():
    gpu = h100(mig_mode=True)
    (finding,) = run(mig_enabled, node(gpu))
    assert finding.remedy.startswith(mig_off_command(gpu.index) + "  # ")
    assert MIG_OFF_NEEDS in finding.remedy


def test_no_rule_spells_the_mig_off_command_itself():
    spelled = [path.name for path in RULES.glob("*.py") if "-mig 0" in path.read_text()]
    assert spelled == []
