"""How the script supervisor starts a command: where the hook lives, which GPU it sees, which
Python it runs on, and the check the ``imports`` stage makes in that Python."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

INJECT_DIR = str(Path(__file__).resolve().parent / "inject")  # first on the command's PYTHONPATH
IMPORT_CHECK = (
    "import json, sys\n"
    "import torch\n"
    "info = {'torch_version': torch.__version__, 'torch_cuda': torch.version.cuda}\n"
    "if len(sys.argv) > 2:\n"  # the module the command runs with -m: found where it runs?
    "    import importlib.util\n"
    "    try:\n"
    "        info['module_found'] = importlib.util.find_spec(sys.argv[2]) is not None\n"
    "    except ImportError:\n"
    "        info['module_found'] = False\n"
    "if sys.argv[1] == 'cuda':\n"
    "    x = torch.arange(1 << 20, dtype=torch.float32, device='cuda')\n"
    "    assert float(x.sum().item()) > 0\n"
    "    info['device_name'] = torch.cuda.get_device_name(0)\n"
    "print('GPU-AUDIT-IMPORTS ' + json.dumps(info))\n"
)


def cuda_visible_devices(device: str, current: str | None) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` for the stage: the chosen GPU (counted within what is already
    visible), none for the CPU, unchanged otherwise."""
    if device == "cpu":
        return ""
    if device.startswith("cuda:"):
        index = int(device.split(":")[1])
        visible = [v.strip() for v in (current or "").split(",") if v.strip()]
        if visible and index < len(visible):
            return visible[index]
        return str(index)
    return None


def resolve_program(program: str, env: dict[str, str], cwd: str) -> str | None:
    if os.sep in program:
        path = Path(program) if os.path.isabs(program) else Path(cwd) / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH"))


def python_of(program: str) -> str | None:
    """The Python interpreter a program runs on: itself, or its ``#!`` line's."""
    name = os.path.basename(program)
    if name.startswith("python"):
        return program
    try:
        with open(program, "rb") as handle:
            first = handle.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!") or "python" not in first:
        return None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return shutil.which(words[0]) if words else None
    return words[0] if words else None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


NOT_PYTHON = "is not a Python program"  # the imports stage's note about such a program
# Python's own options that take the next argument as their value.
_PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "--check-hash-based-pycs"})


def command_script(command: list[str], program: str) -> str | None:
    """The script file ``command`` runs, when it names one: for a Python interpreter its first
    argument that is not an option (none with ``-m``, ``-c`` or ``-``); for any other program
    (``torchrun``, ``accelerate launch``) its first argument ending in ``.py``."""
    args = command[1:]
    if os.path.basename(program).startswith("python"):
        skip = False
        for arg in args:
            if skip:
                skip = False
            elif arg in _PYTHON_VALUE_OPTIONS:
                skip = True
            elif arg == "-" or arg.startswith(("-m", "-c")):
                return None
            elif not arg.startswith("-"):
                return arg
        return None
    return next((a for a in args if a.endswith(".py") and not a.startswith("-")), None)


def command_module(command: list[str], program: str) -> str | None:
    """The module a Python ``command`` runs with ``-m MOD`` (or ``-mMOD``), placeholders
    excepted; ``None`` for any other command."""
    if not os.path.basename(program).startswith("python"):
        return None
    args = command[1:]
    skip = False
    for position, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in _PYTHON_VALUE_OPTIONS:
            skip = True
        elif arg.startswith("-m"):
            module = arg[2:] or (args[position + 1] if position + 1 < len(args) else "")
            return module if module and "{" not in module else None
        elif not arg.startswith("-") or arg.startswith("-c"):
            return None
    return None


def missing_in_command(command: list[str], env: dict[str, str] | os._Environ[str],
                       cwd: str) -> str | None:
    """What ``command`` needs that is not there, as one sentence: its program (not on
    ``PATH``, or not executable) or the script it runs (relative to ``cwd``, where the stages
    start it); ``None`` when both are there. Words with a placeholder are not checked."""
    if not command or "{" in command[0]:
        return None
    program = resolve_program(command[0], dict(env), cwd)
    if program is None:
        return f"its program {command[0]!r} was not found (not on PATH, or not executable)"
    script = command_script(command, program)
    if script is None or "{" in script:
        return None
    path = Path(script).expanduser()
    if not (path if path.is_absolute() else Path(cwd) / path).is_file():
        return f"the script {script!r} it runs was not found (in {cwd})"
    return None
