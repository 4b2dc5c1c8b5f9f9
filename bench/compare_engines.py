"""Check that explain's two prefilter engines agree on a set of real logs.

For every ``*.log`` under the folders (or the files) given, compares the candidates of the
Python passes with those found from GNU grep's anchors (line, text, context, tail flag: every
field), and the explain JSON of each engine (the elapsed time aside). Run from the repository
root::

    python bench/compare_engines.py /work/corpus-explain/tuning /work/corpus-explain/holdout

Prints one line per disagreement and a summary; exit status 0 when all agree, 1 otherwise,
2 when there is no trusted GNU grep to compare with.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpu_audit.explain import explain_sources, grepscan  # noqa: E402
from gpu_audit.explain.render import to_document  # noqa: E402
from gpu_audit.explain.scanner import BLOCK_SIZE, BlockScanner, Candidate, scan_chunks  # noqa: E402


def python_candidates(path: Path) -> list[Candidate]:
    with open(path, "rb") as handle:
        return list(scan_chunks(iter(lambda: handle.read(BLOCK_SIZE), b"")))


def grep_candidates(grep: str, path: Path, blocks: list[int]) -> list[Candidate]:
    """The candidates through grep's anchors; adds to ``blocks`` (blocks grep's anchors served,
    blocks the Python passes scanned)."""
    reader = grepscan.PreadReader(open(path, "rb"))  # noqa: SIM115 - closed below
    try:
        with grepscan.GrepPrefilter(grep, reader.fileno()) as prefilter:
            found = list(scan_chunks(iter(lambda: reader.read(BLOCK_SIZE), b""),
                                     BlockScanner(prefilter=prefilter)))
        blocks[0] += prefilter.blocks[0]
        blocks[1] += prefilter.blocks[1]
        return found
    finally:
        reader.close()


def explain_json(path: Path, grep_paths: tuple[str, ...]) -> bytes:
    saved, grepscan.GREP_PATHS = grepscan.GREP_PATHS, grep_paths
    try:
        result = explain_sources([str(path)], torch_version="2.3.1", workers=1)
    finally:
        grepscan.GREP_PATHS = saved
    document = to_document(dataclasses.replace(result, elapsed_s=None), tool_version="0",
                           generated_at="now")
    return msgspec.json.encode(document)


def logs(places: list[str]) -> list[Path]:
    found: list[Path] = []
    for place in map(Path, places):
        found += sorted(place.rglob("*.log")) if place.is_dir() else [place]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("places", nargs="+", help="folders (their *.log, recursively) or files")
    parser.add_argument("--max-block-hits", type=int, default=grepscan.MAX_BLOCK_HITS,
                        help="anchors in a block above which the Python passes scan it "
                             "(raise it to compare grep's path on logs dense in anchors)")
    args = parser.parse_args()
    grepscan.MAX_BLOCK_HITS = args.max_block_hits
    grep = grepscan.find_grep()
    if grep is None:
        print("no trusted GNU grep here: nothing to compare", file=sys.stderr)
        return 2
    paths = logs(args.places)
    differ = 0
    blocks = [0, 0]
    for path in paths:
        problems = []
        if grep_candidates(grep, path, blocks) != python_candidates(path):
            problems.append("candidates")
        if explain_json(path, (grep,)) != explain_json(path, ()):
            problems.append("explain JSON")
        if problems:
            differ += 1
            print(f"DIFFER ({', '.join(problems)}): {path}")
    print(f"{len(paths)} logs compared with {grep}: {len(paths) - differ} agree, {differ} differ "
          f"(blocks from grep's anchors: {blocks[0]}, by the Python passes: {blocks[1]})")
    return 1 if differ or not paths else 0


if __name__ == "__main__":
    sys.exit(main())
