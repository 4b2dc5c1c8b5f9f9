"""Reading a PyTorch memory snapshot pickle without trusting it.

``torch.cuda.memory._dump_snapshot()`` pickles a dictionary of plain containers and numbers.
A pickle can name any importable callable and run it while loading, so a snapshot someone sent
you could run code the moment it is opened with :func:`pickle.load`, and a few kilobytes of
memo references can stand for billions of items. :func:`~gpu_audit.plain_pickle.loads_plain`
resolves no global except a few builtin container types and bounds the data described, so a
hostile file fails to load with a clear message instead of running anything or filling memory.
Persistent ids are refused too (the base class does that when ``persistent_load`` is not
defined).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from gpu_audit.errors import InputError
from gpu_audit.inputs import SNAPSHOT_LIMIT, read_input
from gpu_audit.plain_pickle import PickleTooLargeError, UnsafePickleError, loads_plain

SNAPSHOT_HINT = (
    "expected a memory snapshot written by torch.cuda.memory._dump_snapshot() "
    "or gpu_audit.monitor(snapshot_on_oom=True)"
)
_REFUSE = "a memory snapshot holds only plain data, so this file is not one (or was tampered with)"


def loads_snapshot(data: bytes, source: str = "snapshot") -> Any:
    """Unpickle ``data`` safely; raises :class:`InputError` naming ``source`` on any failure.

    Only plain data is built, and a file describing more than
    :data:`~gpu_audit.plain_pickle.DEFAULT_MAX_ITEMS` items (a memo bomb) is refused quickly.
    """
    try:
        return loads_plain(data, refuse=_REFUSE)
    except UnsafePickleError as exc:
        raise InputError(f"{source}: {exc}") from None
    except PickleTooLargeError as exc:
        raise InputError(f"{source}: refusing this pickle: {exc}; {SNAPSHOT_HINT}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, OverflowError, MemoryError, RecursionError) as exc:
        detail = str(exc) or type(exc).__name__
        raise InputError(f"{source}: not a readable pickle ({detail}); {SNAPSHOT_HINT}") from None


def load_snapshot(path: Path) -> Any:
    """The unpickled snapshot at ``path`` (not yet checked for shape; see ``summary``)."""
    path = Path(path)

    try:
        data = read_input(path, limit=SNAPSHOT_LIMIT, what="snapshot")
    except InputError as exc:
        raise InputError(f"cannot read {exc}; {SNAPSHOT_HINT}") from None
    if not data:
        raise InputError(f"{path}: the file is empty; {SNAPSHOT_HINT}")
    return loads_snapshot(data, str(path))
