"""The diag document and report: every figure beside its expectation and ratio; the schema."""

from __future__ import annotations

import json
import re

from gpu_audit.diag.judge import judge
from gpu_audit.diag.render import diag_document, render_markdown, render_terminal
from gpu_audit.diag.results import DiagOptions, DiagResult
from gpu_audit.serial import dumps
from tests.diag import recorded


def result_of(level: int, runs) -> DiagResult:
    return DiagResult(options=DiagOptions(level=level), generated_at="2026-11-23T10:00:00Z",
                      hostname="node7", selection=None, gpus=runs, peers=None,
                      judgement=judge(level, runs), plans={}, estimate={"seconds": 60},
                      driver_version="550.90.07", torch_version="2.5.1")


def test_document_schema_and_figures() -> None:
    document = diag_document(result_of(2, [recorded.half_width_h100()]))
    doc = json.loads(dumps(document))  # the JSON diag prints
    assert doc["schema"] == "gpu-audit.diag/1" and doc["tool_version"]
    assert doc["generated_at"] == "2026-11-23T10:00:00Z"
    assert doc["summary"]["exit_code"] == 1 and doc["summary"]["verdict"] == "WARNING"
    h2d = next(f for f in doc["gpus"][0]["figures"] if f["metric"] == "h2d-bandwidth")
    assert h2d["measured"] == 25.6 and h2d["expected"] == 25.2 and h2d["basis"] == "link"
    assert doc["gpus"][0]["pcie"]["width_current"] == 8


def test_markdown_and_terminal_put_each_figure_beside_its_expectation() -> None:
    result = result_of(3, [recorded.decaying_h100()])
    markdown = render_markdown(result, {0: "diag-x-gpu0.png"})
    assert markdown.startswith("# gpu-audit diag level 3: CRITICAL")
    assert "| gpu:0 | matmul-bf16 | 720 TFLOPS | 643 | 112% | table |" in markdown
    assert "## Sustained load, GPU 0" in markdown and "![GPU 0 under load](diag-x-gpu0.png)" \
        in markdown
    assert "nvidia-tensor-core-gpu-datasheet" in markdown  # the table's source is cited
    text = render_terminal(result)
    assert text.startswith("DIAG CRITICAL: level 3 on 1 GPU of node7")
    assert "diag-thermal-decay" in text and "matmul-bf16" in text and "= 112%" in text


def test_peer_access_matrix_beside_nvlink() -> None:
    from gpu_audit.diag.results import PeerRun, WorkerOutcome

    runs = [recorded.h100_run(0), recorded.h100_run(1)]
    peers = PeerRun(indices=[0, 1], matrix=[[None, True], [False, None]],
                    nvlink={0: {"active_links": 18, "peer_pci_bus_ids": []}, 1: None},
                    worker=WorkerOutcome(status="done"))
    result = result_of(1, runs)
    result.peers = peers
    result.judgement = judge(1, runs, peers)
    markdown = render_markdown(result)
    assert "| 0 | - | yes |" in markdown and "| 1 | NO | - |" in markdown
    assert "GPU 0: 18 active; GPU 1: not reported" in markdown
    assert diag_document(result).peers.peer_access == [[None, True], [False, None]]


def test_terminal_prose_wraps_between_words_and_commands_stay_whole() -> None:
    text = render_terminal(result_of(3, [recorded.decaying_h100()]), width=60)
    findings = [line for line in text.splitlines() if not line.startswith("    gpu:")]
    # A line runs past the width only to keep one quoted command whole: it holds that alone.
    wide = [line for line in findings if len(line) > 60]
    assert all(" " not in re.sub(r"`[^`]+`", "", line.strip()) for line in wide), wide
    quoted = "`nvidia-smi -q -i 0 -d TEMPERATURE,POWER,PERFORMANCE`"
    assert any(quoted in line for line in findings), text  # not broken across two lines
    words = text.split()
    assert "diag-thermal-decay" in words  # an id is never cut
    fixes = [line for line in text.splitlines() if line.lstrip().startswith("fix: ")]
    assert fixes, text


def test_the_status_line_stays_one_line_when_asked():
    result = result_of(3, [recorded.decaying_h100()])
    assert render_terminal(result, width=40).splitlines()[1].startswith("    ")  # wrapped
    one = render_terminal(result, width=40, wrap_status=False).splitlines()
    assert one[0].startswith("DIAG ") and "critical=" in one[0]
