"""Where reports land: ``reports/<command>-<UTC timestamp>-p<pid>-<host>.md`` with a ``.json``
twin; and how many stay (:func:`prune_reports`, the ``keep_reports`` setting, counted per host so
that a folder many nodes share keeps every node's newest reports)."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from gpu_audit.errors import UsageError
from gpu_audit.hostname import host_name
from gpu_audit.serial import dumps, write_atomic

DEFAULT_FOLDER = Path("reports")


def report_stem(command: str, generated_at: str, hostname: str, run: str | None = None) -> str:
    """``scan-20261122T101500Z-p4242-myhost``: sortable by time, safe as a file name, and
    unique between runs in the same second (``run``: this process's id by default)."""
    stamp = re.sub(r"[-:]", "", generated_at)
    host = host_in_name(hostname)
    run = f"p{os.getpid()}" if run is None else run
    return f"{command}-{stamp}-{run}-{host}"


def host_in_name(hostname: str) -> str:
    """How a host is written in its reports' names (what retention compares)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", hostname) or "host"


def unique_stem(folder: Path, command: str, generated_at: str, hostname: str,
                suffixes: tuple[str, ...] = (".md", ".json")) -> str:
    """A stem no file in ``folder`` has yet, for any of ``suffixes``.

    Runs at the same time have different process ids; one process writing several reports in a
    second (or a recycled id) gets ``p4242.2``, ``p4242.3``... Files of one run share the stem.
    """
    pid = os.getpid()
    for n in range(1, 10_000):
        stem = report_stem(command, generated_at, hostname, f"p{pid}" + (f".{n}" if n > 1 else ""))
        if not any(os.path.lexists(folder / f"{stem}{suffix}") for suffix in suffixes):
            return stem
    raise UsageError(f"{folder}: too many reports named {stem}*; clean the folder up")


def write_report(
    command: str,
    generated_at: str,
    hostname: str,
    document: Any,  # a document struct, or its JSON data
    markdown: str,
    out: Path | None,
    keep: int | None = None,
    companions: tuple[str, ...] = (),
) -> Path | None:
    """Write the markdown report and its JSON twin atomically; returns the markdown's path.

    With an explicit ``out`` a write failure is the user's error (exit 3); with the default
    folder it is a warning, so a read-only working directory does not stop a scan.
    ``keep``: then keep only the newest ``keep`` reports of ``command`` by this host in the
    folder (:func:`prune_reports`; ``None`` or 0 keeps all), with the ``companions`` files a
    command writes beside its report (the fleet's ``-gpus.csv``).
    """
    folder = out or DEFAULT_FOLDER
    try:
        stem = unique_stem(folder, command, generated_at, hostname)
        write_atomic(folder / f"{stem}.json", dumps(document) + "\n")
        md = write_atomic(folder / f"{stem}.md", markdown)
    except OSError as exc:
        message = f"cannot write the report to {folder}: {exc.strerror or exc}"
        if out is not None:
            raise UsageError(message + " (pass a writable --out DIR)") from None
        print(f"gpu-audit: {message}; pass --out DIR or --no-report", file=sys.stderr)
        return None
    print(f"report: {md}", file=sys.stderr)
    if keep:
        prune_reports(folder, command, keep, own=stem, host=hostname, companions=companions)
    return md


REPORT_SUFFIXES = (".md", ".json")


def report_name_pattern(command: str, companions: tuple[str, ...] = ()) -> re.Pattern[str]:
    """What :func:`report_stem` names for ``command`` (``.md`` or ``.json``, or one of the
    ``companions`` endings such as ``-gpus.csv``): groups ``stamp``, ``host`` and ``stem``.
    Nothing else in a folder matches it: not temporary files (they start with a dot), not
    another command's reports, not files beside a report other than its ``companions``. The
    host is what follows the run (``p4242`` or ``p4242.2``, which holds no ``-``) up to the
    ending, so a host named like a companion (``node-gpu0``) still reads as itself."""
    endings = "|".join(re.escape(e) for e in (*REPORT_SUFFIXES, *companions))
    return re.compile(rf"^(?P<stem>{re.escape(command)}-(?P<stamp>\d{{8}}T\d{{6}}(?:\.\d+)?Z)"
                      rf"-p\d+(?:\.\d+)?-(?P<host>[A-Za-z0-9._-]+))(?:{endings})$")


def prune_reports(folder: Path, command: str, keep: int, *, own: str | None = None,
                  host: str | None = None, companions: tuple[str, ...] = ()) -> list[Path]:
    """Delete all but the newest ``keep`` reports of ``command`` by ``host`` in ``folder``;
    returns what was deleted.

    Reports are counted and deleted per host: only those whose name carries ``host`` (default:
    the host in ``own``'s name, else this machine's name), the name :func:`report_stem` gave
    them from the document's own host name. So nodes writing into one shared folder
    (``check --json --out SHARED`` on every node) each prune only their own reports, and every
    node's newest ``keep`` stay; a file whose name gives no host is not gpu-audit's and is left
    alone. Only files gpu-audit names (:func:`report_name_pattern`) are touched, and of those only
    regular files this user owns: a symbolic link, a folder or another user's file with such a
    name is neither counted nor deleted. A report is its markdown and JSON twin (one stem), and
    the files named by the stem and one of ``companions`` (``-gpus.csv``, ``-heatmap.png``).
    Newest is by the UTC time in the name; reports of the same second as the oldest one kept
    are all kept, so runs started together (each with its own name) never delete each other's
    report, and ``own`` (the stem this run wrote) is never deleted. Another run deleting the
    same file first is not an error, nor is a file that cannot be deleted (a warning).
    """
    if keep <= 0:
        return []
    pattern = report_name_pattern(command, companions)
    mine = _pruning_host(pattern, own, host)
    uid = os.geteuid()
    stamps: dict[str, str] = {}
    names: dict[str, list[str]] = {}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                match = pattern.match(entry.name)
                if match is None or match["host"] != mine:
                    continue  # not a report, or another host's
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone already
                if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
                    continue
                stamps[match["stem"]] = match["stamp"]
                names.setdefault(match["stem"], []).append(entry.name)
    except OSError as exc:
        print(f"gpu-audit: cannot list {folder} to prune old reports: {exc.strerror or exc}",
              file=sys.stderr)
        return []
    newest_first = sorted(stamps, key=lambda stem: (stamps[stem], stem), reverse=True)
    if len(newest_first) <= keep:
        return []
    oldest_kept = stamps[newest_first[keep - 1]]
    deleted = []
    for stem in newest_first[keep:]:
        if stem == own or stamps[stem] >= oldest_kept:
            continue
        for name in names[stem]:
            try:
                os.unlink(folder / name)
            except FileNotFoundError:
                continue  # another run pruned it first
            except OSError as exc:
                print(f"gpu-audit: cannot delete the old report {folder / name}: "
                      f"{exc.strerror or exc}", file=sys.stderr)
                continue
            deleted.append(folder / name)
    return deleted


def _pruning_host(pattern: re.Pattern[str], own: str | None, host: str | None) -> str:
    """The host whose reports a pruning counts, as names write it (see :func:`prune_reports`)."""
    if host is not None:
        return host_in_name(host)
    match = pattern.match(f"{own}{REPORT_SUFFIXES[0]}") if own else None
    return match["host"] if match else host_in_name(host_name())
