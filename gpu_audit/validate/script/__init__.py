"""``gpu-audit validate [OPTIONS] -- COMMAND...``: the stages over the user's unmodified script.

Modules: :mod:`.spec` (the command, its placeholders, metrics and configuration keys),
:mod:`.supervisor` (the stage worker for a command: starts it, reads its output and its
telemetry streams, writes the cycle records, stops it), :mod:`.streams` (reading the per-rank
streams and the output into cycles), :mod:`.outside` (NVML, RSS and swap sampled from outside
the script), :mod:`.hook` (runs inside the script) and ``inject/sitecustomize.py`` (starts the
hook at interpreter start-up and chains any existing ``sitecustomize``).
"""
