"""A plain ``gpu-audit scan`` line runs without typer (gpu_audit.cli.declared); the two ways of
running a command must not differ in anything a user or a script sees: stdout, stderr, exit code.

Each matrix line runs once through the plain parser and once through typer (``FAST_PATH`` off),
in two processes on the same fake node, and the results are compared.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]

# Runs every line of argv[2] (a JSON list of command lines) through main() in this process and
# writes what each one printed and returned to argv[3]; argv[1] "typer" turns the plain parser off.
# A second element "fail:NAME" replaces scan's function with one that raises NAME.
RUNNER = r"""
import contextlib, errno, io, json, sys
from gpu_audit.cli import app
from gpu_audit.cli.declared import DECLARED

mode, lines, result_file = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
app.FAST_PATH = mode == "fast"
failure = sys.argv[4] if len(sys.argv) > 4 else None
if failure:
    import gpu_audit.cli.scan
    from gpu_audit.errors import UsageError

    def fail(**options):
        raise {
            "interrupt": KeyboardInterrupt(), "eof": EOFError(),
            "pipe": BrokenPipeError(errno.EPIPE, "Broken pipe"),
            "nospace": OSError(errno.ENOSPC, "No space left on device"),
            "usage": UsageError("--gpus: no such GPU"), "bug": RuntimeError("boom"),
        }[failure]

    DECLARED["scan"] = DECLARED["scan"]._replace(function=fail)
results = []
for line in lines:
    plain = app._fast_command(app.hoist_verbose(line)) is not None
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = app.main(line)
        except SystemExit as exc:
            code = ("SystemExit", exc.code)
    results.append({"line": line, "plain": plain, "code": code, "out": out.getvalue(),
                    "err": err.getvalue()})
    app._state["verbose"] = 0
with open(result_file, "w") as f:
    json.dump({"results": results, "typer": "typer" in sys.modules}, f)
"""

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
# What changes between two scans of the same machine: free memory, resident sizes, its duration.
MOVING = re.compile(r'"(memory_available_bytes|swap_\w+_bytes|rss_bytes|scan_duration_s)": [\d.]+')

REPORT_NAME = re.compile(r"\d{8}T\d{6}Z-p\d+")  # reports/scan-20261123T185816Z-p6874-vm.md


def _normalised(text: str) -> str:
    """The same scan twice differs only in when it was taken and what memory was free."""
    text = REPORT_NAME.sub("<stamp>-<pid>", STAMP.sub("<time>", text))
    return MOVING.sub(r'"\1": 0', text)


def run_both(env: dict[str, str], tmp_path: Path, lines: list[list[str]], failure: str = "",
             ) -> tuple[dict, dict]:
    outcomes = []
    for mode in ("fast", "typer"):
        cwd = tmp_path / mode
        cwd.mkdir(exist_ok=True)
        result = cwd / "result.json"
        argv = [sys.executable, "-c", RUNNER, mode, json.dumps(lines), str(result)]
        completed = subprocess.run([*argv, *([failure] if failure else [])], env=env, cwd=cwd,
                                   capture_output=True, text=True, timeout=300)
        assert completed.returncode == 0, completed.stderr
        outcomes.append(json.loads(result.read_text()))
    return outcomes[0], outcomes[1]


def saved_node(fake_nvml, base: dict[str, str], tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A fake two-GPU node's environment, and its scan saved for ``--from``."""
    env = fake_nvml(h100_node(2), base=base)
    saved = tmp_path / "saved.json"
    completed = subprocess.run(
        [sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report"], env=env,
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert completed.returncode in (0, 1, 2), completed.stderr
    saved.write_text(completed.stdout)
    return env, saved


@pytest.fixture
def node(fake_nvml, cli_env, tmp_path: Path) -> tuple[dict[str, str], Path]:
    return saved_node(fake_nvml, cli_env, tmp_path)


def test_plain_and_typer_parsing_give_the_same_results(node, tmp_path: Path):
    env, saved = node
    doc = str(saved)
    bad_config = tmp_path / "bad.toml"
    bad_config.write_text("[tool.gpu-audit\n")
    config = tmp_path / "good.toml"
    config.write_text("[tool.gpu-audit]\nfail_on = \"warning\"\n")
    plain = [
        ["scan", "--json", "--no-report"],
        ["-v", "scan", "--no-report", "--json"],
        ["scan", "--json", "--no-report", "-vv"],
        ["scan", "--json", "--no-report", "--timeout", "2"],
        ["scan", "--json", "--no-report", "--timeout=2.5", "--gpus", "1"],
        ["scan", "--json", "--no-report", "--gpus=9"],
        ["scan", "--from", doc, "--json", "--no-report"],
        ["scan", "--from", doc, "--no-report"],
        ["scan", "--from", doc, "--format", "nagios", "--no-report"],
        ["scan", "--from", doc, "--format=JSON", "--no-report"],
        ["scan", "--from", doc, "--json", "--format", "nagios", "--no-report"],
        ["scan", "--from", doc, "--format", "xml", "--no-report"],
        ["scan", "--from", doc, "--json", "--fail-on", "warning", "--no-report"],
        ["scan", "--from", doc, "--json", "--fail-on", "bogus", "--no-report"],
        ["scan", "--from", doc, "--json", "--config", str(config), "--no-report"],
        ["scan", "--from", doc, "--json", "--config", str(bad_config), "--no-report"],
        ["scan", "--from", str(tmp_path / "missing.json"), "--json", "--no-report"],
        ["scan", "--from", doc, "--pid", "1", "--json", "--no-report"],
        ["scan", "--from", doc, "--json", "--out", "reports"],
        ["scan", "--from", doc, "--json", "--no-report", "--prometheus", "gpu.prom"],
        ["scan", "--from", doc, "--format", "nagios", "--no-report",
         "--prometheus", "missing-folder/gpu.prom"],
        ["scan", "--json", "--no-report", "--timeout", "86400", "--pid", "999999999"],
    ]
    for_typer = [
        ["scan", "--help"],
        ["scan", "-h"],
        ["--version"],
        ["scan", "--bogus"],
        ["scan", "extra"],
        ["scan", "--json=1", "--no-report"],
        ["scan", "--json", "--json", "--no-report"],
        ["scan", "--timeout"],
        ["scan", "--timeout", "0", "--json", "--no-report"],
        ["scan", "--timeout", "86401", "--json", "--no-report"],
        ["scan", "--timeout", "nan", "--json", "--no-report"],
        ["scan", "--timeout=inf", "--json", "--no-report"],
        ["scan", "--timeout", "-1", "--json", "--no-report"],
        ["scan", "--pid", "x", "--json", "--no-report"],
        ["scan", "--pid=", "--json", "--no-report"],
        ["scan", "--from", doc, "--json", "--out", "", "--no-report"],
        ["scan", "--", "--json"],
        ["-x", "scan"],
        ["scan", "-vx"],
    ]
    fast, typer = run_both(env, tmp_path, plain + for_typer)
    assert not typer["results"][0]["plain"]  # FAST_PATH off: every line went through typer
    for ours, theirs in zip(fast["results"], typer["results"], strict=True):
        line = ours["line"]
        assert ours["plain"] == (line in plain), line
        assert ours["code"] == theirs["code"], line
        assert _normalised(ours["out"]) == _normalised(theirs["out"]), line
        assert _normalised(ours["err"]) == _normalised(theirs["err"]), line
    codes = {tuple(r["line"]): r["code"] for r in fast["results"]}
    assert codes[("scan", "--from", doc, "--json", "--fail-on", "bogus", "--no-report")] == 3
    assert codes[("scan", "--timeout", "0", "--json", "--no-report")] == 3
    assert codes[("scan", "--help")] == 0
    # The reports went where they were asked to, on both paths.
    assert list((tmp_path / "fast" / "reports").iterdir())
    assert list((tmp_path / "typer" / "reports").iterdir())


@pytest.mark.parametrize("failure", ["interrupt", "eof", "pipe", "nospace", "usage", "bug"])
def test_a_command_that_stops_stops_alike_on_both_paths(node, tmp_path: Path, failure: str):
    env, _ = node
    lines = [["scan", "--json", "--no-report"], ["-v", "scan", "--json", "--no-report"]]
    fast, typer = run_both(env, tmp_path, lines, failure)
    for ours, theirs in zip(fast["results"], typer["results"], strict=True):
        assert ours["plain"] and not theirs["plain"]
        assert (ours["code"], ours["out"]) == (theirs["code"], theirs["out"]), failure
        # -v adds a traceback; its file paths and line numbers are the same code's
        assert ours["err"].splitlines()[-2:] == theirs["err"].splitlines()[-2:], failure


def test_a_plain_scan_line_never_loads_typer(node, tmp_path: Path):
    env, saved = node
    fast, _ = run_both(env, tmp_path, [["scan", "--json", "--no-report"],
                                       ["scan", "--from", str(saved), "--format", "nagios",
                                        "--no-report"]])
    assert [r["plain"] for r in fast["results"]] == [True, True]
    assert fast["typer"] is False


# The console script's run(): after a plain line the process ends as any Python program does,
# with everything an exit owes: atexit handlers, threads that are not daemons, every buffered
# byte of output. (Objects that only reference cycles keep alive, such as a module's globals,
# are not finalized by a last collection: run() freezes what start-up built, so that the
# interpreter does not walk it all again at exit; Python does not promise that collection.)
EXITING = r"""
import atexit, sys, threading, time
from pathlib import Path
from gpu_audit.cli import app

atexit.register(lambda: print("atexit ran", file=sys.stderr))

def late():
    time.sleep(0.3)
    Path("thread-done").write_text("yes")

if sys.argv[1] == "thread":
    threading.Thread(target=late).start()
sys.argv = ["gpu-audit", *sys.argv[2:]]
app.run()
"""


@pytest.mark.parametrize("thread", ["thread", "none"])
def test_a_plain_scan_exits_with_everything_an_exit_owes(node, tmp_path: Path, thread: str):
    env, saved = node
    line = ["scan", "--from", str(saved), "--json", "--no-report", "--fail-on", "critical"]
    completed = subprocess.run([sys.executable, "-c", EXITING, thread, *line], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    expected = subprocess.run([sys.executable, "-m", "gpu_audit", *line], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert completed.returncode == expected.returncode
    assert completed.stdout == expected.stdout  # a pipe: fully buffered, all of it flushed
    assert json.loads(completed.stdout)["schema"] == "gpu-audit.scan/1"
    assert (tmp_path / "thread-done").exists() == (thread == "thread")
    assert completed.stderr.splitlines()[-1:] == ["atexit ran"]  # thread or none


# What a plain `scan --json` has no use for, each a measured cost of every start (bench/RESULTS.md,
# "scan start-up: records as structs"): typer's command tree; dataclasses, whose generated methods
# are compiled from source text; the json module, whose place msgspec takes unless a saved
# document is read; psutil, whose figures a scan on Linux reads from /proc itself ("scan start-up
# without psutil"); GPU selection, which only --gpus uses; MIG's reader and remedy, which only a
# MIG GPU needs. (inspect is not listed: typing_extensions, where installed, imports it. Nor is
# the Xid table: the test machine's own kernel log may name an Xid.)
NOT_IMPORTED_BY_A_PLAIN_SCAN = ("typer", "click", "rich", "dataclasses", "json", "difflib",
                                "tomllib", "email", "importlib.metadata", "psutil",
                                "gpu_audit.gpu_selection", "gpu_audit.collect.nvml.mig",
                                "gpu_audit.knowledge.mig")

MODULES = r"""
import sys
from gpu_audit.cli import app

code = app.main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write("\n".join(sorted(sys.modules)))
sys.exit(code)
"""


def test_a_plain_scan_imports_only_what_it_uses(fake_nvml, cli_env, tmp_path: Path):
    # a real process on each GPU (its details are looked up) and one that is gone
    sleeper = subprocess.Popen(["sleep", "600"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        loaded = _modules_of_a_plain_scan(fake_nvml(h100_node(2, pids=[sleeper.pid, gone.pid]),
                                                    base=cli_env), tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert "gpu_audit.collect.nvml" in loaded and "msgspec" in loaded  # the listing is whole
    assert sorted(loaded.intersection(NOT_IMPORTED_BY_A_PLAIN_SCAN)) == []


def _modules_of_a_plain_scan(env: dict[str, str], tmp_path: Path) -> set[str]:
    listing = tmp_path / "modules.txt"
    completed = subprocess.run(
        [sys.executable, "-c", MODULES, str(listing), "scan", "--json", "--no-report"], env=env,
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert completed.returncode in (0, 1, 2), completed.stderr
    document = json.loads(completed.stdout)
    assert len(document["gpus"]) == 2
    assert [p["visible"] for p in document["processes"]] == [True, False]
    return set(listing.read_text().split())


# pathlib (with urllib.parse and ipaddress, which it imports) costs every start some 15 million
# instructions; the scan joins and reads its paths as strings, and the commands that write files
# import it where they do (a module listed here would still import it).
PATHLIB_STILL_IMPORTED_BY: tuple[str, ...] = ()

WHO_IMPORTS = r"""
import sys, traceback

# A development environment's site (an editable install's finder) may have loaded it already.
for name in [m for m in sys.modules if m == "pathlib"]:
    del sys.modules[name]
importers = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pathlib":
            ours = [f"gpu_audit/{f.filename.rpartition('/gpu_audit/')[2]}"
                    for f in traceback.extract_stack() if "/gpu_audit/" in f.filename]
            importers.append(ours[-1] if ours else "?")
        return None


sys.meta_path.insert(0, Watch())
from gpu_audit.cli import app

code = app.main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write("\n".join(importers))
sys.exit(code)
"""


@pytest.mark.parametrize("line", [["scan", "--json", "--no-report"],
                                  ["check", "--json", "--no-report"]])
def test_a_plain_scan_joins_its_paths_without_pathlib(fake_nvml, cli_env, tmp_path: Path,
                                                       line: list[str]):
    env = fake_nvml(h100_node(2), base=cli_env)
    listing = tmp_path / "importers.txt"
    completed = subprocess.run(
        [sys.executable, "-c", WHO_IMPORTS, str(listing), *line], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=120)
    assert completed.returncode in (0, 1, 2), completed.stderr
    assert json.loads(completed.stdout)["schema"].startswith(f"gpu-audit.{line[0]}")
    importers = set(listing.read_text().split())
    assert sorted(importers.difference(PATHLIB_STILL_IMPORTED_BY)) == []
