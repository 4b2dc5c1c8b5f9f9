#!/usr/bin/env bash
# Drain the nodes a fleet judgement found broken, with gpu-audit's reason.
#
#   examples/slurm-drain-unfit.sh RUN_DIR            # prints the scontrol lines (a dry run)
#   examples/slurm-drain-unfit.sh RUN_DIR --apply    # runs them (as a Slurm operator)
#
# RUN_DIR holds the node documents of examples/slurm-fleet.sh (or any folder of `gpu-audit check
# --json` documents). `gpu-audit merge` judges them; a node whose own verdict is CRITICAL (not
# a duplicate) is drained only for a node problem: a finding at error or above that the finding
# catalogue declares the machine's (`gpu-audit rules --json`: "node_problem": a lost or failing
# GPU, a driver that does not answer, memory a finished job left behind). A node unfit only for
# its workload (duplicate server copies, allocator settings, the job's environment) is listed
# as a comment, never drained: that is the user's to fix. Each drained node gets one line
#   scontrol update NodeName=<short host name> State=DRAIN Reason='gpu-audit: <id> on <gpu>: ...'
# (at most 200 characters, cut between words). Nodes that gave no verdict (UNKNOWN) are listed
# as comments, not drained: a missing document is not a broken node. The exit code is the
# fleet's (0 OK ... 3 UNKNOWN); 3 also when the judgement could not be read.
#   GPU_AUDIT   the gpu-audit command (default: gpu-audit on PATH)
set -u
run_dir="${1:?usage: slurm-drain-unfit.sh RUN_DIR [--apply]}"
apply="${2:-}"
gpu_audit="${GPU_AUDIT:-gpu-audit}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$gpu_audit" merge "$run_dir" --json --no-report > "$work/fleet.json"
rc=$?
[ -s "$work/fleet.json" ] || exit "$rc"
"$gpu_audit" rules --json > "$work/rules.json" || exit 3

python3 - "$work/fleet.json" "$work/rules.json" "$apply" <<'PY' || exit 3
import json, re, shlex, subprocess, sys

LIMIT, SAFE = 200, re.compile(r"[^A-Za-z0-9._@:/+=,() -]")
fleet = json.load(open(sys.argv[1], encoding="utf-8"))
rules = json.load(open(sys.argv[2], encoding="utf-8"))["rules"]
machine = {r["id"] for r in rules if r.get("node_problem")}  # the catalogue's declaration


def fit(text: str, tail: str = "") -> str:
    """``text tail`` on one line within LIMIT: text cut between words (never inside a number),
    an ellipsis marking the cut; the tail kept whole."""
    text, room = " ".join(SAFE.sub("_", text).split()), LIMIT - len(tail)
    if len(text) > room:
        text = text[:room - 4].rsplit(" ", 1)[0] + " ..."
    return text + tail


def items(path: str) -> list[dict]:
    """The node's findings and failed checks, from its own document."""
    try:
        doc = json.load(open(path, encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = [f for f in doc.get("findings") or [] if isinstance(f, dict)]
    found += [{"id": c.get("finding_id"), "severity": "error", "subject": c.get("subject"),
               "title": c.get("summary") or c.get("title")}
              for c in doc.get("checks") or []
              if isinstance(c, dict) and c.get("status") == "fail"]
    return found


for node in fleet["nodes"]:
    if node.get("duplicate_of"):
        continue
    name = shlex.quote(node["name"])
    if node["status"] == "UNKNOWN":
        print(f"# no verdict from {name}: {fit(node.get('reason') or 'no reason recorded')}")
    if node["status"] != "CRITICAL":
        continue
    found = items(node["source"])
    broken = [f for f in found if f.get("id") in machine
              and f.get("severity") in ("error", "critical")]
    if not broken:
        ids = sorted({str(f.get("id")) for f in found if f.get("id")}) or ["?"]
        print("# " + fit(f"not drained: {name} is unfit for its workload only "
                         f"({', '.join(ids)})"))
        continue
    broken.sort(key=lambda f: f["severity"] != "critical")
    first = broken[0]
    more = f" (+{len(broken) - 1} more)" if len(broken) > 1 else ""
    where = SAFE.sub("_", str(first.get("subject") or "host"))
    why = fit(f"gpu-audit: {first['id']} on {where}: {first.get('title') or ''}", more)
    host = (node.get("hostname") or node["name"]).split(".")[0]
    command = ["scontrol", "update", f"NodeName={host}", "State=DRAIN", f"Reason={why}"]
    print(shlex.join(command), flush=True)
    if sys.argv[3] == "--apply":
        subprocess.run(command, check=True)
PY
exit "$rc"
