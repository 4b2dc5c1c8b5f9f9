"""The check policy: the keys only ``gpu-audit check`` reads, on top of the one policy.

A :class:`CheckPolicy` *is* a :class:`~gpu_audit.config.policy.Policy`: check evaluates the scan
rules with it, and its checks read the rules' findings, so a threshold such as
``min_free_vram_pct`` decides the scan finding and the check's verdict alike. It is read from
``[tool.gpu-audit]``, then ``[tool.gpu-audit.check]`` (``[check]`` in ``gpu-audit.toml``, or the
top level of a ``--policy`` file), which may set any ``[tool.gpu-audit]`` key again for check
alone, then ``GPU_AUDIT_<KEY>`` variables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from gpu_audit.config.files import (
    OWN_FILE,
    PYPROJECT,
    PYPROJECT_TABLE,
    TableRef,
    _warn,
    file_base,
    find_config_file,
)
from gpu_audit.config.load import CHECK_TABLE, Layers, Origin, process_environ
from gpu_audit.config.policy import Policy, keys_of
from gpu_audit.config.schema import CHECK, default
from gpu_audit.errors import ConfigError
from gpu_audit.model import Severity
from gpu_audit.units import GIB

if TYPE_CHECKING:
    from pathlib import Path


class CheckPolicy(Policy, frozen=True):
    """The keys only ``gpu-audit check`` reads (``[tool.gpu-audit.check]``), on top of
    :class:`Policy`. The mode keys say what a check makes of its problem: "fail", "warn" or
    "ignore"."""

    min_gpus: int = default(CHECK, "min_gpus")
    gpu_name: str | None = default(CHECK, "gpu_name")
    min_gpu_memory_gib: float | None = default(CHECK, "min_gpu_memory_gib")
    min_free_vram_gib: float | None = default(CHECK, "min_free_vram_gib")
    max_gpu_temperature_c: float | None = default(CHECK, "max_gpu_temperature_c")
    require_persistence_mode: bool = default(CHECK, "require_persistence_mode")
    min_driver_version: str | None = default(CHECK, "min_driver_version")
    min_cuda_driver_version: str | None = default(CHECK, "min_cuda_driver_version")
    free_vram: str = default(CHECK, "free_vram")
    swap: str = default(CHECK, "swap")
    duplicate_backends: str = default(CHECK, "duplicate_backends")
    unattributed_vram: str = default(CHECK, "unattributed_vram")
    foreign_processes: str = default(CHECK, "foreign_processes")
    own_processes: str = default(CHECK, "own_processes")
    warn_on: str = default(CHECK, "warn_on")
    require_torch_cuda: bool = default(CHECK, "require_torch_cuda")
    stages: list[str] = msgspec.field(default_factory=list)
    slurm_hook_deadline_s: float = default(CHECK, "slurm_hook_deadline_s")
    slurm_settle_s: float = default(CHECK, "slurm_settle_s")

    @property
    def warn_on_severity(self) -> Severity:
        return Severity.parse(self.warn_on)

    def gib_bytes(self, name: str) -> int | None:
        """A ``*_gib`` threshold in bytes, or ``None`` when it is not set."""
        value = getattr(self, name)
        return None if value is None else int(value * GIB)

    def to_dict(self) -> dict[str, Any]:
        """The effective values, for the JSON document and ``--json`` readers."""
        return {name: getattr(self, name) for name in self.__struct_fields__}


def check_keys() -> dict[str, tuple[type, bool]]:
    """The keys only ``gpu-audit check`` reads."""
    shared = keys_of(Policy)
    return {k: v for k, v in keys_of(CheckPolicy).items() if k not in shared}


def _check_table(path: Path) -> TableRef:
    """Where the check's keys are in ``path``: its check table, or the top level of a file
    that is neither ``pyproject.toml`` nor ``gpu-audit.toml`` (a ``--policy`` file) unless it
    holds them in ``[tool.gpu-audit.check]``."""
    if path.name in (PYPROJECT, OWN_FILE) or file_base(path) == PYPROJECT_TABLE:
        return TableRef(path, CHECK_TABLE, labelled=True)
    return TableRef(path)


def load_check_policy(
    path: Path | None = None,
    *,
    search_from: Path | None = None,
    known_ids: set[str] | None = None,
    more_ids: Callable[[], set[str]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> CheckPolicy:
    """The policy ``gpu-audit check`` judges with.

    ``[tool.gpu-audit]`` of the nearest configuration file (or of ``path`` when it is one), then
    the check table of that file or the file ``path`` (``--policy``), then ``GPU_AUDIT_*``.
    ``known_ids`` (finding and check ids) lets ``ignore`` name a typo with a suggestion; without
    it any id is accepted. ``more_ids``, called only for an id ``known_ids`` lacks, gives the
    rest (ids costlier to gather: other commands' catalogues).
    """
    if path is not None:
        from pathlib import Path  # here: a --policy file was given

        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: policy file not found" if not path.exists()
                              else f"{path}: not a file")
    own = path is not None and (path.name in (PYPROJECT, OWN_FILE)
                                or file_base(path) == PYPROJECT_TABLE)
    base = path if own else find_config_file(search_from)
    check_file = path or base
    layers = Layers(keys_of(CheckPolicy))
    if base is not None:
        layers.table(TableRef(base), keys_of(Policy), rank=1, root=True)
    if check_file is not None:
        layers.table(_check_table(check_file), layers.keys, rank=2)
    layers.environment(process_environ(environ), rank=3)
    _check_severities(layers)
    _check_settle_within_deadline(layers)
    if known_ids is not None:
        redirects = check_ignored_ids(layers.added_ids, known_ids, more_ids)
        if redirects:
            layers.values["ignore"] = redirect_ignored(layers.values["ignore"], redirects)
    return CheckPolicy(**layers.values, source=layers.source())


def _check_severities(layers: Layers) -> None:
    """``warn_on`` may not be above ``fail_on``. A ``fail_on`` set at a higher layer than
    ``warn_on`` lowers it, as ``--fail-on`` does; within one layer the pair is an error."""
    fail_on = Severity.parse(layers.values.get("fail_on", Policy().fail_on))
    warn_on = Severity.parse(layers.values.get("warn_on", CheckPolicy().warn_on))
    if warn_on <= fail_on:
        return
    if layers.rank.get("fail_on", 0) > layers.rank.get("warn_on", 0):
        layers.values["warn_on"] = fail_on.value
        return
    origin = layers.origins["warn_on"]
    raise origin.error("warn_on", f"warn_on ({warn_on.value!r}) must not be above fail_on "
                                  f"({fail_on.value!r})")


def _check_settle_within_deadline(layers: Layers) -> None:
    """The epilog's second look must fit in the hook's deadline, with time to scan again."""
    deadline = layers.values.get("slurm_hook_deadline_s", CheckPolicy().slurm_hook_deadline_s)
    settle = layers.values.get("slurm_settle_s", CheckPolicy().slurm_settle_s)
    if settle < deadline:
        return
    key = max(("slurm_settle_s", "slurm_hook_deadline_s"), key=lambda k: layers.rank.get(k, 0))
    origin = layers.origins.get(key) or layers.origins.get("slurm_settle_s") \
        or layers.origins["slurm_hook_deadline_s"]
    raise origin.error(key, f"slurm_settle_s ({settle:g} s) must be below "
                            f"slurm_hook_deadline_s ({deadline:g} s)")


def check_ignored_ids(named: dict[str, Origin], known_ids: set[str],
                      more_ids: Callable[[], set[str]] | None = None) -> dict[str, str]:
    """Every id an ``ignore`` key or ``GPU_AUDIT_IGNORE`` names must exist: a misspelt id would
    silently ignore nothing. ``more_ids`` completes ``known_ids`` the first time an id is not in
    it. A deprecated id of the finding catalogue is accepted with a warning that names the id it
    now is; the result maps each such id to that one (see :func:`redirect_ignored`)."""
    import difflib

    from gpu_audit.knowledge.findings import CATALOGUE, resolve

    redirects: dict[str, str] = {}
    for item, origin in named.items():
        if item not in known_ids and more_ids is not None:
            known_ids, more_ids = known_ids | more_ids(), None
        if item in known_ids:
            if item in CATALOGUE and CATALOGUE[item].deprecated:
                redirects[item], note = resolve(item)
                where = (origin.where("ignore") if isinstance(origin, TableRef)
                         else f"environment variable {origin}")
                _warn(f"{where}: key 'ignore': {note}; ignoring {redirects[item]!r}")
            continue
        close = difflib.get_close_matches(item, sorted(known_ids), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else " (`gpu-audit rules` lists them)"
        raise origin.error("ignore", f"key 'ignore': unknown finding or check id {item!r}{hint}")
    return redirects


def redirect_ignored(ignore: list[str], redirects: dict[str, str]) -> list[str]:
    """``ignore`` with each deprecated id replaced by the id it now is (once)."""
    out: list[str] = []
    for item in (redirects.get(i, i) for i in ignore):
        if item not in out:
            out.append(item)
    return out
