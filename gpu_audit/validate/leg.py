"""What one attempt at one stage knows about itself, whether it runs a protocol workload in this
process (``stage.StageWorker``) or supervises the user's own command (``script.ScriptStage``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_audit.validate.plan import split_leg
from gpu_audit.validate.state import RunDir


class StageLeg:
    """The run folder and its plan, the leg (variant and stage), the device, the attempt number
    and the two channels to the runner (events out, control in)."""

    def __init__(self, run_dir: Path, leg: str, device: str, attempt: int, events: Any,
                 control: Any) -> None:

        self.run = RunDir(run_dir)
        self.plan = self.run.read_plan()
        self.leg = leg
        self.variant_label, self.stage_name = split_leg(leg)
        self.variant = self.plan.variant(self.variant_label)
        self.stage = self.plan.stage(self.stage_name)
        self.device = device
        self.attempt = attempt
        self.events = events
        self.control = control
