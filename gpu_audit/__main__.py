"""``python -m gpu_audit``: the ``gpu-audit`` command."""

import gc

# Before typer is imported: see gpu_audit.cli.app.collect_garbage_rarely (run() calls it too).
gc.set_threshold(50_000, *gc.get_threshold()[1:])

from gpu_audit.cli.app import run  # noqa: E402

run()
