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
