"""Outputs of two source trees (or one tree with its /proc reader off) on one fake node.

The node's GPUs list real processes of every kind a scan meets: sleepers, one with a long
program name, one listening on TCP, a zombie, one of another user (uid 4242, when run as root),
pid 1, a kernel thread and a pid that is gone. Each tree runs ``scan --json``, ``scan`` and
``check --json`` (``--no-report``); pids, times and the host's moving memory figures are
masked, and the outputs must be byte-identical.

    python bench/compare_proc_outputs.py BEFORE_TREE AFTER_TREE [--psutil-after]

``--psutil-after`` runs the second tree with its /proc reader off (psutil answers), as on a
system without /proc.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakegpu import h100_node, scenario_env  # noqa: E402

RUN = (
    "import sys\n"
    "if sys.argv[1] == 'psutil':\n"
    "    from gpu_audit.collect import procfs\n"
    "    procfs.usable = lambda root=None: False\n"
    "from gpu_audit.cli import app\n"
    "sys.exit(app.main(sys.argv[2:]))\n"
)
COMMANDS = (["scan", "--json", "--no-report"], ["scan", "--no-report"],
            ["check", "--json", "--no-report"])
MOVING = re.compile(
    r'("(?:memory_available_bytes|swap_used_bytes|swap_in_bytes|swap_out_bytes|'
    r'duration_s|scan_duration_s|elapsed_s)": )[0-9.e+-]+'
)
TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?")


def start_processes(tmp: Path) -> tuple[list[subprocess.Popen], list[int]]:
    long_name = tmp / "a-very-long-program-name-for-training"
    long_name.symlink_to("/bin/sleep")
    listener = ("import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen();"
                " print(s.getsockname()[1], flush=True); time.sleep(600)")
    procs = [subprocess.Popen(["sleep", "600"]),
             subprocess.Popen([str(long_name), "600"]),
             subprocess.Popen([sys.executable, "-c", listener], stdout=subprocess.PIPE),
             subprocess.Popen(["true"])]  # left unreaped: a zombie
    if os.geteuid() == 0:
        procs.append(subprocess.Popen(["sleep", "600"], preexec_fn=lambda: os.setuid(4242)))
    procs[2].stdout.readline()
    gone = subprocess.Popen(["true"])
    gone.wait()
    return procs, [p.pid for p in procs] + [1, 2, gone.pid]


def masked(text: str, pids: list[int]) -> str:
    text = MOVING.sub(r"\1#", TIMES.sub("TIME", text))
    for pid in sorted(pids, key=lambda p: -len(str(p))):
        text = re.sub(rf"(?<![0-9]){pid}(?![0-9])", "PID", text)
    return text


def outputs(tree: str, mode: str, env: dict[str, str], pids: list[int]) -> list[str]:
    results = []
    for command in COMMANDS:
        done = subprocess.run([sys.executable, "-c", RUN, mode, *command], capture_output=True,
                              text=True, timeout=300, env={**env, "PYTHONPATH": tree}, cwd=tree)
        results.append(f"$ {' '.join(command)} -> {done.returncode}\n"
                       + masked(done.stdout, pids) + masked(done.stderr, pids))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--psutil-after", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compare-proc-") as name:
        tmp = Path(name)
        procs, pids = start_processes(tmp)
        try:
            env = scenario_env(h100_node(8, pids=pids), tmp,
                               dict(os.environ, NO_COLOR="1", COLUMNS="120"))
            before = outputs(args.before, "proc", env, pids)
            after = outputs(args.after, "psutil" if args.psutil_after else "proc", env, pids)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    same = True
    for old, new in zip(before, after, strict=True):
        header = old.splitlines()[0]
        if old == new:
            print(f"identical: {header} ({len(old)} characters)")
        else:
            same = False
            import difflib

            print(f"DIFFERENT: {header}")
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       "before", "after", n=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
