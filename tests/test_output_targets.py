"""Output paths that are not plain files: devices and FIFOs are written through, links and other
special files are refused (exit 3), and nothing ever hangs on a FIFO nobody reads."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpu_audit.serial import UnsafeTarget, write_atomic
from tests import builders as b
from tests.cli.test_check_cli import run_check, saved_scan


def _shared(folder: Path) -> Path:
    """A folder like /tmp: anyone may create files (and plant links) in it."""
    folder.mkdir(exist_ok=True)
    folder.chmod(0o1777)
    return folder


def _char_device(tmp_path: Path) -> Path:
    """A private ``/dev/null`` twin (so a failing test cannot break the real one)."""
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot create a character device here")
    return path


def _read_fifo(path: Path, into: list[bytes], expected: int) -> threading.Event:
    """A reader that has the FIFO open before this returns and collects ``expected`` bytes.

    It opens the read end without blocking, so it is a reader from the start: a writer opening
    the FIFO after this returns always finds it (no probe, whose open and close would leave a
    moment with no reader).
    """
    opened, done = threading.Event(), threading.Event()

    def reader() -> None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        opened.set()
        chunks, got, deadline = [], 0, time.monotonic() + 10
        try:
            while got < expected and time.monotonic() < deadline:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    chunk = b""
                if chunk:
                    chunks.append(chunk)
                    got += len(chunk)
                else:
                    time.sleep(0.005)
        finally:
            os.close(fd)
            into.append(b"".join(chunks))
            done.set()

    threading.Thread(target=reader, daemon=True).start()
    opened.wait(5)
    return done


def test_a_character_device_is_written_through_not_replaced(tmp_path):
    device = _char_device(tmp_path)
    write_atomic(device, "report\n")
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_fifo_with_a_reader_gets_the_content(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    done = _read_fifo(fifo, got, 200_000)
    write_atomic(fifo, "x" * 200_000)
    done.wait(10)
    assert got == [b"x" * 200_000]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeTarget, match="no reader"):
        write_atomic(fifo, "x")


def test_a_symlink_in_a_shared_folder_is_refused_and_its_destination_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = _shared(tmp_path / "shared") / "report.xml"
    link.symlink_to(victim)
    with pytest.raises(UnsafeTarget, match="symbolic link") as caught:
        write_atomic(link, "overwritten")
    assert caught.value.exit_code == 3
    assert victim.read_text() == "precious\n"
    assert link.is_symlink()
    dangling = tmp_path / "shared" / "dangling.xml"
    dangling.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(UnsafeTarget):
        write_atomic(dangling, "x")
    assert not (tmp_path / "would-be-created").exists()


def test_a_link_only_its_owner_could_make_is_followed_and_stays_a_link(tmp_path):
    real = tmp_path / "real.xml"
    real.write_text("old")
    link = tmp_path / "mine" / "report.xml"
    link.parent.mkdir(mode=0o755)
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_dev_stdout_on_a_pipe_or_a_file_is_written_through(tmp_path):
    code = "from gpu_audit.serial import write_atomic; write_atomic('/dev/stdout', 'doc\\n')"
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "doc\n"
    out = tmp_path / "stdout.txt"
    with open(out, "w") as handle:
        to_file = subprocess.run([sys.executable, "-c", code], stdout=handle, timeout=60)
    assert to_file.returncode == 0 and out.read_text() == "doc\n"


def test_folders_and_sockets_are_refused(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(UnsafeTarget, match="is a directory"):
        write_atomic(folder, "x")
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with pytest.raises(UnsafeTarget, match="socket"):
            write_atomic(path, "x")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()


def test_a_regular_file_is_still_replaced_atomically(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    write_atomic(target, "new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


# --- through the command line -------------------------------------------------------------------


def test_junit_to_dev_null_leaves_dev_null_a_character_device(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    result = run_check(["--from", str(saved), "--user", "ci", "--no-report", "--junit",
                        "/dev/null"], cli_env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert "Traceback" not in result.stderr


def test_junit_to_a_fifo_with_a_reader_and_to_a_symlink(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    fifo = tmp_path / "junit.pipe"
    os.mkfifo(fifo)
    # The reader holds the read end open from the start (no moment without a reader), then
    # reads until the writer has written and closed.
    loop = (f"import os, time\nfd = os.open({str(fifo)!r}, os.O_RDONLY | os.O_NONBLOCK)\n"
            "print('ready', flush=True)\ndata, deadline = b'', time.monotonic() + 30\n"
            "while time.monotonic() < deadline:\n"
            "    try:\n        chunk = os.read(fd, 65536)\n"
            "    except BlockingIOError:\n        time.sleep(0.005)\n        continue\n"
            "    if chunk:\n        data += chunk\n    elif data:\n        break\n"
            "    else:\n        time.sleep(0.005)\nprint(data.decode())")
    reader = subprocess.Popen([sys.executable, "-c", loop], stdout=subprocess.PIPE, text=True)
    assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
    result = run_check(["--from", str(saved), "--user", "ci", "--no-report", "--junit",
                        str(fifo)], cli_env, tmp_path)
    assert result.returncode == 0, result.stderr
    out, _ = reader.communicate(timeout=30)
    assert "<testsuites" in out

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = _shared(tmp_path / "shared") / "junit.xml"
    link.symlink_to(victim)
    refused = run_check(["--from", str(saved), "--user", "ci", "--no-report", "--junit",
                         str(link)], cli_env, tmp_path)
    assert refused.returncode == 3
    assert "symbolic link" in refused.stderr and "Traceback" not in refused.stderr
    assert victim.read_text() == "precious\n"


def test_out_folder_with_a_planted_report_link_is_refused(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = _shared(tmp_path / "reports")
    # gpu-audit picks the name; a planted link under every name it could pick is refused.
    from gpu_audit.report import files

    monkeypatch.setattr(files, "unique_stem", lambda *a, **k: "fixed")
    (out / "fixed.json").symlink_to(victim)
    with pytest.raises(Exception, match="symbolic link"):
        files.write_report("check", "2026-01-01T00:00:00Z", "node1", {}, "# x\n", out)
    assert victim.read_text() == "precious\n"


def test_step_summary_fifo_without_reader_warns_and_does_not_hang(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    fifo = tmp_path / "summary.pipe"
    os.mkfifo(fifo)
    env = {**cli_env, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(fifo)}
    result = run_check(["--from", str(saved), "--user", "ci", "--no-report"], env, tmp_path,
                       timeout=60)
    assert result.returncode == 0
    assert "GITHUB_STEP_SUMMARY" in result.stderr and "no reader" in result.stderr
    link = _shared(tmp_path / "shared") / "summary.md"
    victim = tmp_path / "victim.md"
    victim.write_text("precious\n")
    link.symlink_to(victim)
    env["GITHUB_STEP_SUMMARY"] = str(link)
    linked = run_check(["--from", str(saved), "--user", "ci", "--no-report"], env, tmp_path)
    assert "symbolic link" in linked.stderr
    assert victim.read_text() == "precious\n"
