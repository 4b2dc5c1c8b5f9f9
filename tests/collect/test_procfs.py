"""The /proc reader against psutil itself, on live processes of every kind a scan meets.

Each field the scan takes from the OS (name, state, start, parent, owner, command line,
resident memory, listening ports) and the errors on the way (gone, zombie, refused) must be what
psutil says for the same process read a moment apart; where ``/proc`` is not there, psutil
answers and the scan's output is the same.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gpu_audit.collect import procfs
from gpu_audit.collect.host import iso_utc, read_host
from gpu_audit.collect.processes import _PsutilProcess, describe, process_opener, read_processes

ROOT = os.geteuid() == 0


@dataclasses.dataclass(frozen=True)
class Entry:
    pid: int
    gpu_index: int = 0
    gpu_uuid: str | None = "GPU-0"
    used_memory_bytes: int | None = 1024**3
    type: str = "compute"


def _kind(exc: BaseException) -> str:
    for cls, word in ((psutil.ZombieProcess, "zombie"), (procfs.ZombieProcess, "zombie"),
                      (psutil.NoSuchProcess, "gone"), (procfs.NoSuchProcess, "gone"),
                      (psutil.AccessDenied, "denied"), (procfs.AccessDenied, "denied")):
        if isinstance(exc, cls):
            return word
    return type(exc).__name__


def psutil_view(pid: int) -> dict | str:
    """What the scan took from psutil before: the fields, or the error that stops them."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            view = {"name": proc.name(), "status": proc.status(),
                    "start": iso_utc(proc.create_time()), "ppid": proc.ppid()}
    except (psutil.Error, OSError) as exc:
        return _kind(exc)
    listen = psutil.CONN_LISTEN
    calls = {
        "user": proc.username, "cmdline": proc.cmdline, "rss": lambda: proc.memory_info().rss,
        "ports": lambda: sorted({c.laddr.port for c in proc.net_connections("inet")
                                 if c.status == listen and c.laddr}),
    }
    for key, call in calls.items():
        try:
            view[key] = call()
        except (psutil.Error, OSError) as exc:
            view[key] = _kind(exc)
    return view


def procfs_view(pid: int, root: str = procfs.PROC) -> dict | str:
    try:
        proc = procfs.Process(pid, root)
        view = {"name": proc.name(), "status": proc.status(),
                "start": iso_utc(proc.create_time()), "ppid": proc.ppid()}
    except (procfs.Error, OSError) as exc:
        return _kind(exc)
    calls = {"user": proc.username, "cmdline": proc.cmdline, "rss": proc.rss,
             "ports": proc.listen_ports}
    for key, call in calls.items():
        try:
            view[key] = call()
        except (procfs.Error, OSError) as exc:
            view[key] = _kind(exc)
    return view


def assert_same(pid: int, moving_rss: bool = False) -> dict | str:
    ours, theirs = procfs_view(pid), psutil_view(pid)
    if moving_rss and isinstance(ours, dict) and isinstance(theirs, dict):
        assert abs(ours.pop("rss") - theirs.pop("rss")) < 64 * 1024**2
    assert ours == theirs
    return ours


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the child never got there"
        time.sleep(0.01)


def started(argv: list[str], **kwargs) -> subprocess.Popen:
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, **kwargs)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"ready"  # exec done, the child set itself up
    # asleep, so that its state and memory hold still while both readers look
    wait_for(lambda: procfs.Process(child.pid).status() == "sleeping")
    return child


def stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
    child.wait(timeout=10)


SLEEPER = "import sys, time; print('ready', flush=True); time.sleep(600)"


def test_this_process_pid_1_and_a_kernel_thread():
    assert_same(os.getpid(), moving_rss=True)
    view = assert_same(1)
    assert isinstance(view, dict) and view["ppid"] == 0
    kthreadd = assert_same(2)
    if isinstance(kthreadd, dict) and kthreadd["name"] == "kthreadd":
        assert kthreadd["cmdline"] == [] and kthreadd["rss"] == 0


def test_a_sleeping_child_and_one_with_a_very_long_command_line():
    long_args = [f"--arg{i}=" + "x" * 2000 for i in range(200)]  # some 400 kB of arguments
    children = [started([sys.executable, "-c", SLEEPER]),
                started([sys.executable, "-c", SLEEPER, *long_args])]
    try:
        for child in children:
            view = assert_same(child.pid)
            assert view["status"] == "sleeping" and view["ppid"] == os.getpid()
        assert assert_same(children[1].pid)["cmdline"][3:] == long_args
    finally:
        for child in children:
            stop(child)


# The child renames itself as setproctitle does: its kernel name (15 characters) and its
# argument area, rewritten in place through /proc/self/mem, to a title with spaces.
RETITLE = textwrap.dedent("""\
    import ctypes, sys, time
    title = sys.argv[1].encode()
    libc = ctypes.CDLL(None)
    libc.prctl(15, ctypes.c_char_p(title[:15]), 0, 0, 0)  # PR_SET_NAME
    fields = open("/proc/self/stat", "rb").read().rpartition(b")")[2].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start)
        mem.write((title + b"\\0" * (end - start))[: end - start])
    print("ready", flush=True)
    time.sleep(600)
    """)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc/self/mem")
def test_a_child_that_rewrote_its_name_and_command_line():
    title = "trainer: rank 0 of 8, epoch 3 " + "p" * 300
    child = started([sys.executable, "-c", RETITLE, title, "pad " * 200])
    try:
        view = assert_same(child.pid)
        assert view["name"].startswith("trainer: rank 0")
        assert view["cmdline"][0].startswith("trainer: rank 0")
    finally:
        stop(child)


def test_a_long_program_name_is_extended_from_its_command_line(tmp_path: Path):
    program = tmp_path / "a-very-long-program-name-for-training"
    program.symlink_to(sys.executable)
    child = started([str(program), "-c", SLEEPER])
    try:
        view = assert_same(child.pid)
        assert view["name"] == program.name  # the kernel keeps 15 characters of it
    finally:
        stop(child)


def test_a_zombie_child():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_for(lambda: procfs_view(child.pid) != "gone" and
                 procfs_view(child.pid)["status"] == "zombie")
        view = assert_same(child.pid)
        assert view["cmdline"] == "zombie" and view["rss"] == 0
        (process,), _ = read_processes([Entry(child.pid)], container=None)
        assert process.status == "zombie" and "zombie" in process.note
    finally:
        child.wait()


@pytest.mark.skipif(not ROOT, reason="starting a process as another user takes root")
def test_a_process_of_another_user_with_no_name():
    child = started(["/bin/sh", "-c", "echo ready; exec sleep 600"],
                    preexec_fn=lambda: os.setuid(4242))
    try:
        assert assert_same(child.pid)["user"] == "4242"
    finally:
        stop(child)


def views_as(uid: int, pids: list[int]) -> list:
    """Both views of each pid, read by a forked copy of this process that became ``uid``."""
    import json

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked reader
        try:
            os.close(read_end)
            os.setuid(uid)
            views = [[procfs_view(pid), psutil_view(pid)] for pid in pids]
            os.write(write_end, json.dumps(views).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(child, 0)
    return json.loads(data)


@pytest.mark.skipif(not ROOT, reason="reading as another user takes root to become one")
def test_what_another_user_is_refused_is_refused_alike():
    """A scan run by a plain user: root's descriptors are not its to list (ports: denied)."""
    sleeper = started([sys.executable, "-c", SLEEPER])
    try:
        (pid1, pid1_theirs), (ours, theirs) = views_as(4242, [1, sleeper.pid])
    finally:
        stop(sleeper)
    assert pid1 == pid1_theirs and pid1["ports"] == "denied"
    assert ours == theirs and ours["ports"] == "denied" and ours["user"] == "root"


LISTENER = textwrap.dedent("""\
    import socket, time
    tcp4 = socket.socket(socket.AF_INET); tcp4.bind(("127.0.0.1", 0)); tcp4.listen()
    tcp6 = socket.socket(socket.AF_INET6); tcp6.bind(("::1", 0)); tcp6.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0))
    out = socket.create_connection(tcp4.getsockname())  # an established one, not listening
    print("ready", tcp4.getsockname()[1], tcp6.getsockname()[1], udp.getsockname()[1], flush=True)
    time.sleep(600)
    """)


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6")
def test_a_process_listening_on_tcp_over_ipv4_and_ipv6_and_holding_a_udp_socket():
    child = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE)
    try:
        _ready, tcp4, tcp6, _udp = child.stdout.readline().split()
        wait_for(lambda: procfs.Process(child.pid).status() == "sleeping")
        view = assert_same(child.pid)
        assert view["ports"] == sorted({int(tcp4), int(tcp6)})
    finally:
        stop(child)


def test_a_vanished_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert assert_same(child.pid) == "gone"
    assert procfs_view(2**31) == "gone" and procfs_view(-1) == "gone"


def test_the_scan_rows_are_the_same_through_proc_and_through_psutil():
    listener = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE)
    sleeper = started([sys.executable, "-c", SLEEPER, "--token", "hf_" + "s" * 30])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        listener.stdout.readline()
        wait_for(lambda: procfs.Process(listener.pid).status() == "sleeping")
        pids = [listener.pid, sleeper.pid, gone.pid, 1, 2]
        opener = process_opener()
        for pid in pids:
            ours, _ = describe(Entry(pid), False, opener)
            theirs, _ = describe(Entry(pid), False, _PsutilProcess)
            assert ours == theirs
        assert ours.parent_cmdline is None and ours.cmdline == []
    finally:
        stop(listener)
        stop(sleeper)


def test_without_proc_psutil_answers_and_the_rows_are_the_same(tmp_path, monkeypatch):
    sleeper = started([sys.executable, "-c", SLEEPER])
    try:
        entries = [Entry(sleeper.pid), Entry(1), Entry(os.getpid() + 10**6)]
        ours = read_processes(entries, container=None)
        with monkeypatch.context() as patched:
            def refuse(*args, **kwargs):
                raise AssertionError("/proc read while it is not there")

            patched.setattr(procfs.Process, "__init__", refuse)
            theirs = read_processes(entries, container=None, root=str(tmp_path))
        assert ours == theirs
    finally:
        stop(sleeper)


def test_host_figures_are_psutils(tmp_path):
    host, errors = read_host()
    memory, swap, boot = psutil.virtual_memory(), psutil.swap_memory(), psutil.boot_time()
    fallback, fallback_errors = read_host(root=str(tmp_path))  # no /proc there: psutil
    assert errors == fallback_errors == []
    assert host.hostname == socket.gethostname()
    for ours in (host, fallback):
        assert ours.memory_total_bytes == memory.total
        assert ours.swap_total_bytes == swap.total
        assert ours.boot_time == iso_utc(boot)
        assert abs(ours.memory_available_bytes - memory.available) < 512 * 1024**2
        assert abs(ours.swap_used_bytes - swap.used) < 512 * 1024**2
        assert 0 <= swap.sin - ours.swap_in_bytes < 512 * 1024**2
        assert 0 <= swap.sout - ours.swap_out_bytes < 512 * 1024**2


# --- a made-up /proc: what live processes rarely show


def fake_proc(tmp_path: Path, stat: str, cmdline: bytes = b"", statm: str = "0 0 0 0 0 0 0",
              meminfo: str = "", vmstat: str = "") -> Path:
    root = tmp_path / "proc"
    (root / "77" / "fd").mkdir(parents=True)
    (root / "net").mkdir()
    (root / "stat").write_text("cpu 1 2 3\nbtime 1700000000\n")
    (root / "77" / "stat").write_text(stat)
    (root / "77" / "cmdline").write_bytes(cmdline)
    (root / "77" / "statm").write_text(statm)
    (root / "77" / "status").write_text("Name:\tx\nUid:\t4242\t0\t0\t0\n")
    (root / "meminfo").write_text(meminfo)
    (root / "vmstat").write_text(vmstat)
    return root


STAT = "77 (a) b) c) X 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 250 0 0\n"


def test_a_name_with_parentheses_an_unknown_state_and_a_start_in_ticks(tmp_path):
    root = fake_proc(tmp_path, STAT.replace(" X ", " Q "), b"a\0b\0")
    proc = procfs.Process(77, str(root))
    assert proc.name() == "a) b) c"
    assert proc.status() == "?"
    assert proc.create_time() == 1700000000 + 250 / os.sysconf("SC_CLK_TCK")
    assert proc.username() == "4242" and proc.ppid() == 1


def test_command_lines_in_setproctitle_shapes(tmp_path):
    shapes = {b"python\0train.py\0": ["python", "train.py"],
              b"trainer: rank 0 step 5": ["trainer:", "rank", "0", "step", "5"],
              b"trainer: rank 0\0": ["trainer:", "rank", "0"],
              b"a\r\nb\rc\0": ["a\nb\nc"]}
    for raw, args in shapes.items():
        root = fake_proc(tmp_path / str(len(raw)) / raw[:3].hex(), STAT, raw)
        assert procfs.Process(77, str(root)).cmdline() == args


def test_a_huge_command_line_is_read_up_to_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(procfs, "MAX_CMDLINE_BYTES", 1000)
    root = fake_proc(tmp_path, STAT, b"x" * 999 + b"\0" + b"y" * 5000 + b"\0")
    assert procfs.Process(77, str(root)).cmdline() == ["x" * 999]


def test_listening_ports_come_from_the_tcp_tables_by_socket_inode(tmp_path):
    root = fake_proc(tmp_path, STAT)
    (root / "77" / "fd" / "3").symlink_to("socket:[1001]")
    (root / "77" / "fd" / "4").symlink_to("socket:[1002]")
    (root / "77" / "fd" / "5").symlink_to("/dev/null")
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  " \
        "timeout inode\n"
    row = "   0: {addr}:{port} 00000000:0000 {st} 00000000:00000000 00:00000000 00000000 0 0 {ino}"
    (root / "net" / "tcp").write_text(head + "\n".join([
        row.format(addr="0100007F", port="1F90", st="0A", ino=1001),  # 8080, ours, listening
        row.format(addr="0100007F", port="1F91", st="01", ino=1002),  # ours, established
        row.format(addr="0100007F", port="0016", st="0A", ino=9999),  # 22, another's
    ]) + "\n")
    assert procfs.Process(77, str(root)).listen_ports() == [8080]  # no tcp6 table: IPv4 only


def test_memory_figures_and_the_cases_left_to_psutil(tmp_path):
    meminfo = ("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\n"
               "SwapTotal: 50 kB\nSwapFree: 20 kB\n")
    vmstat = "pgpgin 1\npswpin 3\npswpout 5\n"
    root = str(fake_proc(tmp_path, STAT, meminfo=meminfo, vmstat=vmstat))
    assert procfs.read_memory(root) == (1000 * 1024, 600 * 1024, 50 * 1024, 30 * 1024,
                                        3 * 4096, 5 * 4096)
    above = meminfo.replace("600 kB", "2000 kB")  # a container's: psutil takes MemFree
    Path(root, "meminfo").write_text(above)
    assert procfs.read_memory(root)[1] == 100 * 1024
    for other in (meminfo.replace("MemAvailable: 600", "MemAvailable: 0"),
                  meminfo.replace("SwapFree: 20 kB\n", "")):
        Path(root, "meminfo").write_text(other)
        assert procfs.read_memory(root) is None
    Path(root, "meminfo").write_text(meminfo)
    Path(root, "vmstat").write_text("pswpin 3\n")
    assert procfs.read_memory(root) is None


def test_every_container_runtime_of_the_cgroup_pattern_is_still_recognised():
    from gpu_audit.collect.processes import container_from_cgroup

    for runtime in ("docker", "cri-containerd", "crio", "libpod", "containerd"):
        text = f"0::/system.slice/{runtime}-{'c' * 64}.scope\n"
        assert container_from_cgroup(text) == f"{runtime}:{'c' * 12}"
    kube = "0::/kubepods/burstable/pod1/" + "d" * 64
    assert container_from_cgroup(kube) == "kubernetes:" + "d" * 12
    assert container_from_cgroup("0::/init.scope\n") is None
