"""Bounds on every input, declared once and applied where the input is parsed.

gpu-audit runs as root in Slurm prologs and epilogs, where a hostile environment variable, flag,
log or document must not be able to exhaust the node. Each ceiling below is the largest value a
real machine or job can need, with room to spare; anything beyond it is refused (exit 3) before
any work proportional to it is done. The ceilings are documented in docs/safety.md ("Limits
and safety").
"""

from __future__ import annotations

from typing import Any

from .errors import InputError

# GPUs one node can hold (NVLink domains and PCIe fabrics top out far below this); a GPU index or
# range past it is refused before anything is expanded.
MAX_GPUS = 1024
# MIG instances of one GPU (seven today), with room for future parts.
MAX_MIG_PER_GPU = 64
# Processes on one GPU node that a document may list (a busy 8-GPU inference node runs hundreds).
MAX_PROCESSES = 16_384
# Findings in one document: every rule, on every GPU and process of a full node.
MAX_FINDINGS = 20_000
# Nodes one fleet merge can be told to expect (--expect, --expect-nodes, a Ray cluster): the
# largest clusters run some tens of thousands; a host list naming more is refused unexpanded.
MAX_FLEET_NODES = 100_000
# Characters of a host list (gpu[001-004,010],login1): 100,000 names written out one by one.
MAX_HOSTLIST_CHARS = 4 * 1024**2
# Digits in an integer read from text: 2**64 has 20; nothing gpu-audit reads needs more.
MAX_INT_DIGITS = 20
# The range of a whole number a program or the kernel writes: int64_t to size_t / uint64_t (an
# unlimited max_split_size is SIZE_MAX). A size, count, id or seed outside it was never printed.
LOWEST_INT = -(2**63)
LARGEST_INT = 2**64 - 1
_MiB, _GiB = 1024**2, 1024**3
# Files gpu-audit reads, by kind (gpu_audit.inputs opens them with these caps).
CONFIG_LIMIT = 4 * _MiB  # gpu-audit.toml, pyproject.toml, --config, --policy
SNAPSHOT_LIMIT = 4 * _GiB  # a PyTorch memory snapshot pickle
SUMMARY_LIMIT = 64 * _MiB  # an existing GITHUB_STEP_SUMMARY file appended to
STREAM_LIMIT = 4 * _GiB  # a log read from stdin or a FIFO by explain
DECOMPRESSED_LIMIT = 4 * _GiB  # a gzip/bzip2/xz log once decompressed
# Bytes of a JSON document gpu-audit reads back (scan/check/diag/fleet documents, run state).
# An 8-GPU, 64-process scan is about 60 kB; a node at every ceiling above stays under this.
MAX_DOCUMENT_BYTES = 64 * _MiB
# Objects and arrays in one JSON document, and its items (commas): counted on the raw text
# before parsing, because parsing is what costs memory (a 60 MB text of 20 million empty objects
# becomes gigabytes of Python objects). Brackets and commas inside strings count too, which only
# errs towards refusing absurd input; a node at every ceiling above stays under both (16,384
# processes of about 30 fields are some 500,000 items), and no accepted document costs more than
# about 200 MiB once parsed.
MAX_JSON_CONTAINERS = 250_000
MAX_JSON_ITEMS = 600_000
# What /proc gives (gpu_audit.collect.procfs). A command line, up to this (the default Linux
# argument area is 2 MiB); a process's environment lives in the same area.
MAX_CMDLINE_BYTES = 4 * _MiB
MAX_ENVIRON_BYTES = MAX_CMDLINE_BYTES
# stat, statm, status, meminfo, vmstat, cgroup: a few kilobytes each.
MAX_PROC_FILE_BYTES = _MiB
# /proc/stat has a line per CPU and one per interrupt before btime: large on big nodes.
MAX_PROC_STAT_BYTES = 16 * _MiB
# Descriptors of one process looked at for sockets: the kernel's default ceiling (nr_open).
MAX_PROC_FDS = 1 << 20
# The one message of the child process that reads NVML (gpu_audit.collect.nvml.isolated): a
# reading of MAX_GPUS GPUs and MAX_PROCESSES processes is a few MiB.
MAX_NVML_MESSAGE_BYTES = 64 * _MiB


def bounded_int(text: str, where: str, *, low: int = 0, high: int | None = None) -> int:
    """An ASCII decimal integer in ``[low, high]`` from ``text``, or :class:`InputError`.

    Only ASCII digits count (``int()`` also takes Arabic-Indic and other Unicode digits, and
    thousands of digits cost quadratic time before it refuses them).
    """
    raw = text.strip()
    digits = raw[1:] if raw[:1] in "+-" else raw
    if not digits or not digits.isascii() or not digits.isdigit():
        raise InputError(f"{where}: {text!r} is not a whole number")
    if len(digits) > MAX_INT_DIGITS:
        raise InputError(f"{where}: {text[:24]!r}… has {len(digits)} digits; at most "
                         f"{MAX_INT_DIGITS} are accepted")
    value = int(raw)
    if value < low or (high is not None and value > high):
        top = "" if high is None else f" to {high}"
        raise InputError(f"{where}: {value} is out of range (allowed: {low}{top})")
    return value


def load_json(text: str | bytes, where: str, *, limit: int = MAX_DOCUMENT_BYTES) -> Any:
    """Parse one JSON text of at most ``limit`` bytes and bounded shape, or :class:`InputError`.

    Deep nesting makes Python's parser raise RecursionError (a line of a million ``[``): that is
    malformed input like any other, never an internal error.
    """
    import json  # here: a scan that reads no document never imports it

    check_json_shape(text, where, limit=limit)
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError(f"{where}: nested too deeply to be a gpu-audit document") from None
    except ValueError as exc:  # JSONDecodeError, and undecodable bytes
        raise InputError(f"{where}: not valid JSON ({exc})") from None


def check_json_shape(text: str | bytes, where: str, *, limit: int = MAX_DOCUMENT_BYTES) -> None:
    """:class:`InputError` unless ``text`` is at most ``limit`` bytes with at most
    :data:`MAX_JSON_CONTAINERS` objects and arrays and :data:`MAX_JSON_ITEMS` items, counted on
    the raw text: what every parser of foreign JSON runs first."""
    if len(text) > limit:
        raise InputError(f"{where}: {len(text)} bytes, more than the {limit} accepted")
    brace, bracket, comma = ("{", "[", ",") if isinstance(text, str) else (b"{", b"[", b",")
    containers = text.count(brace) + text.count(bracket)  # type: ignore[arg-type]
    if containers > MAX_JSON_CONTAINERS:
        raise InputError(f"{where}: {containers} objects and arrays, more than any gpu-audit "
                         f"document holds (at most {MAX_JSON_CONTAINERS})")
    items = text.count(comma)  # type: ignore[arg-type]
    if items > MAX_JSON_ITEMS:
        raise InputError(f"{where}: {items} items, more than any gpu-audit document holds "
                         f"(at most {MAX_JSON_ITEMS})")
