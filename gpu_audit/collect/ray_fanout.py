"""One task per alive node of a Ray cluster, each returning that node's document: the only
module that imports ``ray`` (the optional extra ``gpu-audit[ray]``), imported only by
``gpu-audit fleet``.

Every step has a deadline, so a fleet run never hangs:
- a TCP connection to the cluster address before ``ray.init`` (connecting to a dead address
  otherwise retries for minutes), and ``ray.init`` itself bounded;
- the whole fan-out bounded by one wall-clock limit; a node whose task did not come back by then
  is reported with the reason (timed out, node died, import error there), never waited on.
Tasks ask for no CPU and no GPU (they never queue behind a training job), are pinned to their
node (hard node affinity) and are never retried.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpu_audit.errors import GpuAuditError, UsageError

INSTALL_HINT = "pip install 'gpu-audit[ray]'"
RAY_MISSING = (f"`gpu-audit fleet` needs Ray, which is not installed here: {INSTALL_HINT} "
               "(or use `gpu-audit merge` on documents gathered another way)")


class ClusterUnreachable(GpuAuditError):
    """The Ray cluster could not be reached or joined in time (exit 3)."""


class OtherVersion(Exception):
    """Raised in a node's task whose gpu-audit is not the fleet command's version: the two may
    not agree on the task's arguments or on the document it returns."""


def same_version(fleet_version: str) -> None:
    """Called first in a node's task, with the version of the gpu-audit that sent it."""
    from gpu_audit import __version__

    if fleet_version != __version__:
        raise OtherVersion(f"gpu-audit {__version__} is installed there, {fleet_version} here")


def version_hint() -> str:
    from gpu_audit import __version__

    return f"pip install 'gpu-audit[ray]=={__version__}'"


@dataclass(frozen=True)
class NodeAnswer:
    """What one node's task gave: its document, or the reason it gave none."""

    node_id: str
    address: str  # the node's IP as Ray knows it
    hostname: str | None
    document: dict[str, Any] | None
    reason: str | None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(RAY_MISSING) from None
    return ray


def resolve_address(address: str | None) -> str:
    """The flag, else ``RAY_ADDRESS``, else ``auto`` (the cluster this machine belongs to);
    never empty, so ``ray.init`` joins a cluster and never starts a new one."""
    return address or os.environ.get("RAY_ADDRESS") or "auto"


def host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port`` or ``ray://host:port``; None for ``auto``/``local``."""
    text = address.split("://", 1)[-1].rstrip("/")
    if text in ("auto", "local") or ":" not in text:
        return None
    host, _, port = text.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise UsageError(f"--address {address!r}: expected HOST:PORT (e.g. 10.0.0.1:6379), "
                         "ray://HOST:PORT or auto") from None


def precheck(address: str, timeout_s: float) -> None:
    """Fail fast, with a clear message, when nothing listens at the cluster address."""
    target = host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ClusterUnreachable(
            f"cannot reach the Ray cluster at {address}: {reason} (checked for {timeout_s:g} s); "
            "is the head node up (`ray status` there), and is the address HOST:GCS_PORT?"
        ) from None


def connect(address: str, timeout_s: float) -> Any:
    """``ray`` joined to the cluster at ``address``, within ``timeout_s``."""
    ray = import_ray()
    precheck(address, min(timeout_s, 5.0))
    # Ray's own warnings (e.g. about joining from a helper thread) are not the user's business.
    logging.getLogger("ray").setLevel(logging.ERROR)
    failure: list[BaseException] = []

    def init() -> None:
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR",
                     configure_logging=False, ignore_reinit_error=True)
        except BaseException as exc:  # reported by the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=init, name="gpu-audit-ray-init", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise ClusterUnreachable(f"could not join the Ray cluster at {address} within "
                                 f"{timeout_s:g} s")
    if failure:
        first_line = str(failure[0]).strip().splitlines()[0] if str(failure[0]).strip() else ""
        raise ClusterUnreachable(f"could not join the Ray cluster at {address}: "
                                 f"{type(failure[0]).__name__}: {first_line}")
    return ray


def alive_nodes(ray: Any) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def alive_hostnames(address: str | None, timeout_s: float) -> list[str]:
    """The host names of the Ray cluster's alive nodes (``address``: see
    :func:`resolve_address`), each once, in the cluster's order: whom a merge expects."""
    ray = connect(resolve_address(address), timeout_s=timeout_s)
    try:
        names = [str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or "")
                 for n in alive_nodes(ray)]
    finally:
        disconnect(ray)
    return list(dict.fromkeys(name for name in names if name))


def why_failed(ray: Any, exc: BaseException) -> str:
    """One line saying why a node's task gave no document."""
    text = str(exc)
    imports = ("ModuleNotFoundError", "No module named", "ImportError")
    if any(word in text for word in imports) or ("AttributeError" in text and "gpu_audit" in text):
        last = [ln for ln in text.strip().splitlines() if ln.strip()][-1:]
        detail = last[0].strip() if last else type(exc).__name__
        return (f"import error on that node ({detail}): gpu-audit is missing there or is "
                f"another version; {INSTALL_HINT} there")
    other = _other_version(exc, text)
    if other:
        return f"another gpu-audit version on that node ({other}); {version_hint()} there"
    died = tuple(getattr(ray.exceptions, name) for name in
                 ("NodeDiedError", "WorkerCrashedError", "ObjectLostError",
                  "OwnerDiedError", "LocalRayletDiedError")
                 if hasattr(ray.exceptions, name))
    if isinstance(exc, died):
        return f"the node or its worker died during the scan ({type(exc).__name__})"
    if isinstance(exc, getattr(ray.exceptions, "TaskUnschedulableError", ())):
        return "the task could not be scheduled on that node (it left the cluster?)"
    cause = getattr(exc, "cause", None)
    name = type(cause or exc).__name__
    line = str(cause or exc).strip().splitlines()
    return f"the task failed on that node: {name}: {line[-1] if line else ''}".rstrip(": ")


def _other_version(exc: BaseException, text: str) -> str | None:
    """Why the node's gpu-audit is not this one, when the failure shows it: the node said so
    (:class:`OtherVersion`), or an older node's task took other arguments than it was sent."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, OtherVersion) or isinstance(exc, OtherVersion):
        return str(cause or exc)
    if "OtherVersion" in text:  # the cause could not be rebuilt here: its message is in the text
        lines = [ln.strip() for ln in text.splitlines() if "OtherVersion" in ln]
        return lines[-1].split(":", 1)[-1].strip() or "it said so"
    if "TypeError" in text and "positional argument" in text and "node_document" in text:
        return "its fleet task takes other arguments"
    return None


def fan_out(ray: Any, func: Callable[..., dict[str, Any]], args: tuple[Any, ...],
            timeout_s: float, name: str = "gpu-audit") -> list[NodeAnswer]:
    """Run ``func(*args)`` once on every alive node; every node answers or gets a reason
    within ``timeout_s``."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    deadline = time.monotonic() + timeout_s
    remote = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(func)
    nodes = alive_nodes(ray)
    refs = {}
    for node in nodes:
        strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
        refs[node["NodeID"]] = remote.options(scheduling_strategy=strategy,
                                              name=name).remote(*args)
    pending = list(refs.values())
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=left)
    late = set(pending)
    still_alive = {n["NodeID"] for n in alive_nodes(ray)} if late else set()
    answers = []
    for node in nodes:
        node_id, ref = node["NodeID"], refs[node["NodeID"]]
        document, reason = None, None
        if ref in late:
            _cancel(ray, ref)
            reason = (f"no answer within the {timeout_s:g} s limit (--timeout)"
                      if node_id in still_alive else
                      "the node left the cluster during the scan (dead node)")
        else:
            try:
                document = ray.get(ref, timeout=max(0.1, deadline - time.monotonic()))
            except Exception as exc:
                reason = why_failed(ray, exc)
            if document is not None and not isinstance(document, dict):
                document, reason = None, f"the task returned {type(document).__name__}"
        answers.append(NodeAnswer(node_id=node_id, address=str(node.get("NodeManagerAddress")),
                                  hostname=node.get("NodeManagerHostname"), document=document,
                                  reason=reason))
    return answers


def _cancel(ray: Any, ref: Any) -> None:
    # The task may have finished or its node gone: then there is nothing left to stop.
    with contextlib.suppress(Exception):
        ray.cancel(ref, force=True)


def disconnect(ray: Any) -> None:
    with contextlib.suppress(Exception):
        ray.shutdown()
