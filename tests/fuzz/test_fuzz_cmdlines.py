"""Other users' command lines and process names, generated, through every output gpu-audit
writes them to: the terminal, the markdown report, its JSON twin, the check's JUnit file and
JSON. Nothing crashes. (Command lines are redacted when collected; the redactor's own property
tests live beside it.)"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpu_audit.report.jsonout import scan_document
from gpu_audit.serial import dumps
from tests.builders import gpu, process, scan
from tests.fuzz.support import FUZZ, run_cli

ARGS = ["python", "-m", "torch.distributed.run", "--nproc_per_node=8", "train.py", "--token",
        "--hub_token", "-H", "Authorization: Bearer", "postgres://u:p@ss@h/db", "--config=",
        '{"api_key": 1}', "--", "-p", "mysql", "\x1b]0;title\x07", "\x1b[2J", "\n::error ::x",
        "</details>", "<img src=x onerror=alert(1)>", "[a](http://x)", "|", "\r", "\u202e",
        "WANDB_API_KEY=", "--env=HF_TOKEN="]

arguments = st.one_of(st.sampled_from(ARGS), st.text(max_size=25))


@FUZZ
@given(argvs=st.lists(st.lists(arguments, min_size=1, max_size=10), min_size=1, max_size=3),
       name=st.text(max_size=20))
def test_any_command_line_in_every_output(argvs, name, tmp_path_factory):
    processes = [process(4000 + i, 100 + i, cmdline=argv, name=name or None)
                 for i, argv in enumerate(argvs)]
    folder = tmp_path_factory.mktemp("cmd")
    doc = folder / "scan.json"
    doc.write_text(dumps(scan_document(scan(gpus=[gpu()], processes=processes), [], 0)))
    out = folder / "reports"
    run_cli(["scan", "--from", str(doc), "--out", str(out)])
    run_cli(["check", "--from", str(doc), "--json", "--out", str(out), "--junit",
             str(folder / "junit.xml")])
    assert len(list(out.glob("*.md"))) == 2
