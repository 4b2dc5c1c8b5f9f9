"""Documents: importing the model, encoding and decoding an 8-GPU, 64-process scan document.

    python3 bench/bench_documents.py [--root DIR]

``--root`` runs another checkout's gpu_audit (an archive of an earlier commit, say) for a before
and after comparison; each figure is the best of several runs, in a fresh child process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

IMPORT = """
import time
t = time.perf_counter()
import gpu_audit.model
print(json.dumps({"import_model_ms": (time.perf_counter() - t) * 1e3}))
"""

CODEC = """
import time
from gpu_audit.model import Scan
from gpu_audit.report.jsonout import scan_document
from gpu_audit.rules import evaluate
from gpu_audit.serial import dumps, from_jsonable
from tests import builders as b

gpus = [b.gpu(i, uuid=f"GPU-{i:04d}") for i in range(8)]
processes = [b.process(1000 + i, i % 8, name="python", cmdline=["python", "train.py"])
             for i in range(64)]
scan = b.scan(gpus=gpus, processes=processes)
findings = evaluate(scan)

def best(fn, n=200):
    times = []
    for _ in range(n):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return min(times) * 1e6

text = dumps(scan_document(scan, findings, 0))
figures = {"document_bytes": len(text.encode()),
           "encode_us": best(lambda: dumps(scan_document(scan, findings, 0))),
           "decode_us": best(lambda: from_jsonable(Scan, json.loads(text)))}
try:
    from gpu_audit.serial import decode
    figures["decode_typed_us"] = best(lambda: decode(Scan, text))
except ImportError:
    pass
print(json.dumps(figures))
"""


def child(root: Path, code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", "import json\n" + code], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=REPO)
    args = parser.parse_args()
    imports = [child(args.root, IMPORT)["import_model_ms"] for _ in range(7)]
    print(json.dumps({"root": str(args.root), "import_model_ms": round(min(imports), 2),
                      **{k: round(v, 1) for k, v in child(args.root, CODEC).items()}}))


if __name__ == "__main__":
    main()
