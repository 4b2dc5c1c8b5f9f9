"""Put on ``PYTHONPATH`` by ``gpu-audit validate -- COMMAND``: starts the validate hook
(:mod:`gpu_audit.validate.script.hook`) in every Python the command starts, then runs the
``sitecustomize`` the environment had before, if any, as Python would have.

Never breaks the program: a hook that cannot start says so once on stderr, and a failing
chained ``sitecustomize`` is reported as ``site`` reports one.
"""

import os
import sys


def _start_hook() -> None:
    try:  # inside the try: a hook that cannot load must never stop the user's program
        from gpu_audit.validate.script.hook import install

        install()
    except Exception as exc:
        print(f"gpu-audit validate hook: not started ({type(exc).__name__}: {exc}); the script "
              "runs without per-cycle telemetry", file=sys.stderr, flush=True)


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (the one this file shadows)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as exc:
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
              f"{type(exc).__name__}: {exc}", file=sys.stderr)


_start_hook()
_chain()
