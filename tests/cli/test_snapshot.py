"""``gpu-audit snapshot FILE`` end to end: a user summarises the snapshot their OOM left behind."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.snapshot.synthetic import GIB, MIB, finetune_oom_after_eval

REPO = Path(__file__).resolve().parents[2]


def gpu_audit(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


@pytest.fixture
def oom_pickle(tmp_path: Path) -> Path:
    path = tmp_path / "oom_rank0.pickle"
    path.write_bytes(pickle.dumps(finetune_oom_after_eval()))
    return path


def test_json_summary_with_report_files_and_plot(oom_pickle: Path, tmp_path: Path, cli_env):
    out = tmp_path / "reports"
    result = gpu_audit(["snapshot", str(oom_pickle), "--json", "--out", str(out)], cli_env,
                       tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpu-audit.snapshot/1"
    assert doc["source"] == {"path": str(oom_pickle), "size_bytes": oom_pickle.stat().st_size}
    d0 = doc["devices"][0]
    assert d0["reserved_bytes"] == GIB + 62 * MIB
    assert d0["inactive_split_bytes"] == 384 * MIB + (2 * MIB - 512 - MIB)
    assert d0["largest_free_block_bytes"] == 256 * MIB
    assert d0["largest_allocations"][0]["site"] == "scripts/train.py:95:optimizer_step"
    assert d0["trace"]["ooms"][0]["device_free_bytes"] == 300 * MIB
    assert len(d0["trace"]["timeline"]["time_s"]) == 21
    files = sorted(p.suffix for p in out.iterdir())
    assert files == [".json", ".md", ".png"]
    assert doc["plot"] == next(out.glob("*.png")).name
    markdown = next(out.glob("*.md")).read_text()
    assert "Reserved but unallocated" in markdown and "optimizer_step" in markdown
    assert f"![memory over the recorded history]({doc['plot']})" in markdown
    twin = json.loads(next(out.glob("*.json")).read_text())
    assert twin["devices"] == doc["devices"]
    assert "wrote" in result.stderr


def test_terminal_summary_without_files(oom_pickle: Path, tmp_path: Path, cli_env):
    result = gpu_audit(["snapshot", str(oom_pickle), "--no-report", "--top", "2"], cli_env,
                       tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "Device 0" in text and "Device 1" in text
    assert "Reserved but unallocated" in text
    assert "trapped in split segments" in text
    assert "scripts/train.py:95:optimizer_step" in text
    assert "Out of memory" in text
    assert "evaluate" not in text  # --top 2 leaves out the 512-byte evaluation tensor
    assert not (tmp_path / "reports").exists()


class Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def test_a_hostile_snapshot_is_refused_with_one_line_and_exit_3(tmp_path: Path, cli_env):
    marker = tmp_path / "pwned"
    path = tmp_path / "from_a_stranger.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "payload": Exploit(marker)}))
    result = gpu_audit(["snapshot", str(path), "--no-report"], cli_env, tmp_path)
    assert result.returncode == 3
    assert not marker.exists()
    assert "refusing to load builtins.exec" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("content", [None, b"", b"not a pickle at all", b"\x80\x04K\x2a."])
def test_unreadable_input_exits_3(tmp_path: Path, cli_env, content):
    path = tmp_path / "snapshot.pickle"
    if content is not None:
        path.write_bytes(content)
    result = gpu_audit(["snapshot", str(path), "--no-report"], cli_env, tmp_path)
    assert result.returncode == 3, result.stdout
    assert result.stderr.startswith("gpu-audit: ")
    assert "Traceback" not in result.stderr


def test_an_unwritable_out_folder_is_a_usage_error(oom_pickle: Path, tmp_path: Path, cli_env):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = gpu_audit(["snapshot", str(oom_pickle), "--out", str(blocker / "sub")], cli_env,
                       tmp_path)
    assert result.returncode == 3
    assert "cannot write the report" in result.stderr


def test_without_matplotlib_the_summary_still_comes(oom_pickle: Path, tmp_path: Path, cli_env):
    blocker = tmp_path / "no-matplotlib"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('matplotlib is not installed')\n")
    env = cli_env | {"PYTHONPATH": f"{blocker}:{cli_env['PYTHONPATH']}"}
    out = tmp_path / "reports"
    result = gpu_audit(["snapshot", str(oom_pickle), "--json", "--out", str(out)], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no plot: matplotlib is not installed" in result.stderr
    assert json.loads(result.stdout)["plot"] is None
    assert sorted(p.suffix for p in out.iterdir()) == [".json", ".md"]
