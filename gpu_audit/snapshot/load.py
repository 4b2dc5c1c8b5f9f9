"""Reading a PyTorch memory snapshot pickle without trusting it.

``torch.cuda.memory._dump_snapshot()`` pickles a dictionary of plain containers and numbers.
A pickle can name any importable callable and run it while loading, so a snapshot someone sent
you could run code the moment it is opened with :func:`pickle.load`. :class:`SafeUnpickler`
resolves no global except a few builtin container types, so a hostile file fails to load with
a clear message instead of running anything. Persistent ids are refused too (the base class
does that when ``persistent_load`` is not defined).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from gpu_audit.errors import InputError

# The only globals a snapshot may name: protocol 2 and older spell these through find_class.
_ALLOWED_GLOBALS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("__builtin__", "set"),  # protocol 0-2 pickles written by Python 2 era tooling
    ("__builtin__", "frozenset"),
    ("__builtin__", "complex"),
}

SNAPSHOT_HINT = (
    "expected a memory snapshot written by torch.cuda.memory._dump_snapshot() "
    "or gpu_audit.monitor(snapshot_on_oom=True)"
)


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for something other than plain data."""


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that builds only builtin containers and primitives."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return {"set": set, "frozenset": frozenset, "complex": complex}[name]
        raise UnsafePickleError(f"refusing to load {module}.{name}: a memory snapshot holds "
                                "only plain data, so this file is not one (or was tampered with)")


def loads_snapshot(data: bytes, source: str = "snapshot") -> Any:
    """Unpickle ``data`` safely; raises :class:`InputError` naming ``source`` on any failure."""
    try:
        return SafeUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError as exc:
        raise InputError(f"{source}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, OverflowError, MemoryError, RecursionError) as exc:
        detail = str(exc) or type(exc).__name__
        raise InputError(f"{source}: not a readable pickle ({detail}); {SNAPSHOT_HINT}") from None


def load_snapshot(path: Path) -> Any:
    """The unpickled snapshot at ``path`` (not yet checked for shape; see ``summary``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory; {SNAPSHOT_HINT}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not data:
        raise InputError(f"{path}: the file is empty; {SNAPSHOT_HINT}")
    return loads_snapshot(data, str(path))
