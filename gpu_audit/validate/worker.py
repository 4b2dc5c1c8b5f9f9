"""The stage worker: one child process per stage, started by the runner.

``python -m gpu_audit.validate.worker run --run-dir DIR --leg VARIANT/STAGE --device DEV``

Why a process per stage: the allocator settings must be in the environment before torch is
imported (the allocator reads them once, at load time), each stage should start from a clean
allocator, and a crash, an abort in a CUDA library or a hang must not take the runner down.

The worker sets ``PYTORCH_CUDA_ALLOC_CONF`` and ``PYTORCH_ALLOC_CONF`` to the same string (which
one torch reads depends on its version) before anything imports torch, then imports torch and
the workload, initialises the device, runs the cycles (:mod:`.stage`, each cycle under the OOM
retrier from :mod:`gpu_audit.oom`), appends one record per cycle to the run's ``cycles.jsonl``
and writes a checkpoint every ``checkpoint_every_pct`` of the stage.

Channels (:mod:`.channels`): events for the runner go, one JSON object per line, to the file
descriptor that was stdout at start; stdout is then pointed at stderr (so a workload's ``print``
lands in the log, not in the event stream). stderr is the stage's log file. stdin carries
``stop`` requests; its end means the runner is gone, and the worker then stops at the next cycle
boundary (a checkpoint is written) or, failing that, exits after a grace period.

``python -m gpu_audit.validate.worker probe-devices`` prints the CUDA devices with their free
memory as JSON (for ``--device auto``), in a process of its own so the runner never imports
torch and no CUDA context outlives the probe.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
import traceback
from pathlib import Path

from gpu_audit.validate.channels import EXIT_INTERNAL, Control, Events, one_line
from gpu_audit.validate.device import probe_devices
from gpu_audit.validate.state import RunDir


def _setup_process() -> tuple[Events, Control]:
    events = Events(os.dup(1))
    os.dup2(2, 1)  # the workload's prints (and C-level output) go to the stage log
    faulthandler.enable(file=sys.stderr, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        # The runner sends SIGUSR1 before stopping a hung worker: the stacks land in the log.
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    control = Control()
    control.start()
    return events, control


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_audit.validate.worker")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one stage of a validation run")
    run.add_argument("--run-dir", required=True, type=Path)
    run.add_argument("--leg", required=True)
    run.add_argument("--device", required=True)
    run.add_argument("--attempt", type=int, default=1)
    sub.add_parser("probe-devices", help="print CUDA devices and their free memory as JSON")
    args = parser.parse_args(argv)

    if args.command == "probe-devices":
        print(json.dumps(probe_devices()))
        return 0

    events, control = _setup_process()
    try:
        # The worker loads the one stage it runs (the script supervisor or the workload's).
        if RunDir(args.run_dir).read_plan().script is not None:  # validate -- COMMAND
            from gpu_audit.validate.script.supervisor import ScriptStage as Worker
        else:
            from gpu_audit.validate.stage import StageWorker as Worker
        worker = Worker(args.run_dir, args.leg, args.device, args.attempt, events, control)
        return worker.run_stage()
    except Exception as exc:
        events.send({"ev": "done", "status": "failed", "failure": "internal",
                     "reason": f"the stage worker failed: {one_line(exc)}",
                     "detail": {"traceback": traceback.format_exc()}, "cycles_done": 0,
                     "warnings": []})
        traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
