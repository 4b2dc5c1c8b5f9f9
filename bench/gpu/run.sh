#!/usr/bin/env bash
# One phase of gpu-audit's checks on a real NVIDIA GPU, logged and packed for the trip back.
#
#   OUT=/some/dir bash bench/gpu/run.sh PHASE      PHASE: truth | tests | validate | diag-bench
#   GT_DRY_RUN=1 bash bench/gpu/run.sh PHASE       print the phase's commands, run nothing
#
# Run from anywhere; it works in the repository root. Wheels in .whl/ (bench/gpu/prepare.sh)
# are installed into /tmp/site; gpu_audit runs from the source tree (PYTHONPATH), always as
# "$PY -m gpu_audit". Every command runs under its own timeout, with PYTHONUNBUFFERED=1, and the
# phase goes on after a failure. Each command's stdout, stderr, exit code and seconds land in
# $GT_WORK/logs/; at the end the whole work folder is packed into $OUT/gt-PHASE.tar.gz (the
# largest files are left out if it would exceed GT_MAX_TAR_MB), beside $OUT/summary.txt (one line
# per command: exit code, seconds, name; 124 = timed out, "skip" = no time left in the phase's
# budget) and $OUT/versions.txt.
#
# Settings (environment): GT_BUDGET_S the phase's time budget in seconds (default per phase,
# below); GT_WORK the work folder, emptied first (default /tmp/gt-work/PHASE); GT_PYTHON the
# interpreter (default /opt/torch/.venv/bin/python3 when present, else python3); GT_MAX_TAR_MB
# (15); GT_NO_WHEELS=1 skips installing .whl/; GT_ONLY="NAME ..." runs only those steps;
# GT_PYTEST_WORKERS the test phase's pytest-xdist workers (4); GT_TESTS="PATH[::TEST] ..." runs
# only those tests in the test phase (to re-run what failed on a lease).
set -u
PHASE=${1:-}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 3

RESERVE=20 # seconds of the budget kept for packing
case "$PHASE" in
  truth) DEFAULT_BUDGET=270 ;;
  tests) DEFAULT_BUDGET=420 ;;
  validate) DEFAULT_BUDGET=420 ;;
  diag-bench) DEFAULT_BUDGET=450 ;;
  selftest) DEFAULT_BUDGET=15 RESERVE=2 ;; # the plumbing alone (tests/bench/test_run_sh.py)
  *) echo "usage: bench/gpu/run.sh truth|tests|validate|diag-bench" >&2; exit 3 ;;
esac
BUDGET=${GT_BUDGET_S:-$DEFAULT_BUDGET}
DRY=${GT_DRY_RUN:-0}
if [ -z "${GT_PYTHON:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then GT_PYTHON=/opt/torch/.venv/bin/python3
  else GT_PYTHON=$(command -v python3); fi
fi
PY=$GT_PYTHON
GA="$PY -m gpu_audit"
W=${GT_WORK:-/tmp/gt-work/$PHASE}
export PY GA W PYTHONUNBUFFERED=1 NO_COLOR=1 COLUMNS=200
START=$(date +%s)

if [ "$DRY" != 1 ]; then
  if [ -z "${OUT:-}" ]; then echo "run.sh: set OUT to the folder to bring back" >&2; exit 3; fi
  mkdir -p "$OUT"
  rm -rf "$W"; mkdir -p "$W/logs"
  : >"$W/summary.txt"
fi

# ------------------------------------------------------------------------------------ set-up
setup() {
  if [ -z "${GT_NO_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
    if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl >"$W/logs/setup-wheels.out" 2>&1; then
      # An environment without pip: a wheel is a zip archive of what goes on the path.
      for wheel in .whl/*.whl; do "$PY" -m zipfile -e "$wheel" /tmp/site; done \
        >>"$W/logs/setup-wheels.out" 2>&1
    fi
    echo "$?" >"$W/logs/setup-wheels.rc"
    export PYTHONPATH="/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    export PATH="/tmp/site/bin:$PATH"
  else
    echo "no .whl/ (carry it): nvitop, gpustat and the pinned typer are missing" \
      >"$W/logs/setup-wheels.out"
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  fi
  {
    echo "phase: $PHASE   budget: ${BUDGET}s   date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)   cpus: $(nproc)   python: $PY"
    echo "source: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo 'no git here')" \
         "$(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l) files changed"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id,vbios_version \
      --format=csv 2>&1
    nvidia-smi 2>&1 | head -n 4 | tail -n 2
    "$PY" - <<'EOF' 2>&1
import importlib.metadata as md, platform, sys
print("python", platform.python_version(), sys.executable)
for name in ("torch", "nvidia-ml-py", "typer", "click", "rich", "psutil", "pytest",
             "pytest-timeout", "nvitop", "gpustat", "pandas", "matplotlib", "setuptools"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} -")
try:
    import torch
    print("torch.version.cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
          "cuda available", torch.cuda.is_available())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print("device 0", p.name, f"cc {p.major}.{p.minor}", f"{p.total_memory / 2**30:.1f} GiB")
except Exception as exc:
    print("torch import failed:", exc)
EOF
    echo "gpu-audit: $($GA --version 2>&1)"
    echo "cc: $(command -v cc || echo none)"
  } >"$W/versions.txt" 2>&1
  cp "$W/versions.txt" "$OUT/versions.txt"
}

# ------------------------------------------------------------------------------------- steps
# step NAME TIMEOUT_S COMMAND: run COMMAND (a bash string) under timeout; log and go on.
step() {
  local name=$1 limit=$2 command=$3
  if [ -n "${GT_ONLY:-}" ] && [[ " $GT_ONLY " != *" $name "* ]]; then return 0; fi
  if [ "$DRY" = 1 ]; then printf 'STEP\t%s\t%s\t%s\n' "$name" "$limit" "$command"; return 0; fi
  local now left
  now=$(date +%s)
  left=$((BUDGET - (now - START) - RESERVE))
  if [ "$left" -lt 10 ]; then
    printf '%-4s %6ss  %s\n' skip 0 "$name (no time left in the ${BUDGET}s budget)" >>"$W/summary.txt"
    echo "skip" >"$W/logs/$name.rc"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "$command" >"$W/logs/$name.cmd"
  echo "=== $name (limit ${limit}s): $command"
  local t0 rc
  t0=$(date +%s)
  timeout -k 10 "$limit" bash -c "$command" >"$W/logs/$name.out" 2>"$W/logs/$name.err" </dev/null
  rc=$?
  local took=$(($(date +%s) - t0))
  echo "$rc" >"$W/logs/$name.rc"
  printf '%-4s %6ss  %s\n' "$rc" "$took" "$name" >>"$W/summary.txt"
  tail -n 5 "$W/logs/$name.out" "$W/logs/$name.err" 2>/dev/null | cut -c1-300
  return 0
}

pack() {
  local tar="$OUT/gt-$PHASE.tar.gz" limit_mb=${GT_MAX_TAR_MB:-15}
  {
    echo "# phase $PHASE: $(($(date +%s) - START))s of ${BUDGET}s;" \
      "wheels: $(cat "$W/logs/setup-wheels.rc" 2>/dev/null || echo none);" \
      "$(grep -m1 '^gpu-audit:' "$W/versions.txt" 2>/dev/null); rc seconds name"
    cat "$W/summary.txt"
  } >"$OUT/summary.txt"
  tar -czf "$tar" -C "$(dirname "$W")" "$(basename "$W")" 2>/dev/null
  if [ "$(stat -c %s "$tar")" -gt $((limit_mb * 1024 * 1024)) ]; then
    # Too big for the trip back: leave out the largest files (listed in the summary).
    find "$W" -type f -size +1M -printf '%s %p\n' | sort -rn >"$W/left-out.txt"
    local excludes=() size path
    while read -r size path; do excludes+=("--exclude=${path#"$(dirname "$W")"/}"); done \
      <"$W/left-out.txt"
    tar -czf "$tar" -C "$(dirname "$W")" "${excludes[@]}" "$(basename "$W")" 2>/dev/null
    echo "left out of the tar (over 1 MiB each): $(wc -l <"$W/left-out.txt") files" \
      >>"$OUT/summary.txt"
  fi
  cat "$OUT/summary.txt"
}

# ------------------------------------------------------------------------------------ phases
gpu_test_files() { # the test modules holding @pytest.mark.gpu tests, diag's apart
  grep -rl --include='test_*.py' 'mark.gpu' tests | sort | grep "$@" | tr '\n' ' '
}

phase_truth() {
  step smi-idle 30 "nvidia-smi -q -x > $W/smi-idle.xml"
  step scan-idle 60 "$GA scan --json --no-report > $W/scan-idle.json"
  step compare-idle 30 \
    "$PY bench/gpu/nvsmi_compare.py $W/smi-idle.xml $W/scan-idle.json --json-out $W/compare-idle.json"
  step scan-terminal 60 "$GA scan --out $W/reports"
  step live-monitor 150 "bash bench/gpu/live_scan.sh $W/live"
  step oom 90 "$PY bench/gpu/oom_real.py --out $W/oom"
  step snapshot 60 "$GA snapshot \"\$(grep -m1 '[.]pickle\$' $W/oom/snapshots.txt)\" --out $W/oom/report"
  step snapshot-json 60 "$GA snapshot \"\$(grep -m1 '[.]pickle\$' $W/oom/snapshots.txt)\" --json --no-report > $W/oom/snapshot.json"
  step snapshot-vs-stats 30 "$PY bench/gpu/snapshot_vs_stats.py $W/oom/snapshot.json $W/oom/memory_stats.json"
  step explain-oom 60 "$GA explain $W/logs/oom.err"
  step nccl 100 "$PY bench/gpu/nccl_same_gpu.py --out $W/nccl --timeout 80"
  step explain-nccl 60 "$GA explain $W/nccl/rank0.log $W/nccl/rank1.log"
  step oom-broken-nvml 90 "command -v cc && $PY bench/gpu/oom_real.py --out $W/oom-nvml --broken-nvml"
  step explain-nvml 60 "$GA explain $W/logs/oom-broken-nvml.err"
  step explain-json 60 "$GA explain --json $W/logs/oom.err $W/nccl/rank0.log $W/nccl/rank1.log $W/logs/oom-broken-nvml.err > $W/explain.json"
  step scan-torch 90 "$GA scan --torch --json --no-report > $W/scan-torch.json"
  step dmesg-explain 60 "dmesg > $W/dmesg.txt 2>&1; $GA explain $W/dmesg.txt"
}

phase_tests() {
  local timeout_flag=""
  if [ "$DRY" = 1 ] || "$PY" -c "import pytest_timeout" 2>/dev/null; then
    timeout_flag="--timeout 240"
  fi
  local common="-m gpu -v -rA -p no:cacheprovider --durations=0 $timeout_flag"
  # Test modules run side by side on the one GPU (each file on one worker, as in CI); diag's
  # measure bandwidth and throughput, so they run alone.
  local workers="-n ${GT_PYTEST_WORKERS:-4} --dist loadfile"
  local rest diag
  if [ -n "${GT_TESTS:-}" ]; then # only the named test files or node ids, split the same way
    rest=$(tr ' ' '\n' <<<"$GT_TESTS" | grep -v '^tests/diag/' | grep . | tr '\n' ' ')
    diag=$(tr ' ' '\n' <<<"$GT_TESTS" | grep '^tests/diag/' | tr '\n' ' ')
  else
    rest=$(gpu_test_files -v tests/diag/)
    diag=$(gpu_test_files tests/diag/)
  fi
  [ -n "$rest" ] && step pytest-gpu 300 "$PY -m pytest $common $workers --junitxml $W/junit-gpu.xml $rest"
  [ -n "$diag" ] && step pytest-gpu-diag 200 "$PY -m pytest $common -n 0 --junitxml $W/junit-gpu-diag.xml $diag"
  return 0
}

phase_validate() {
  local v="$GA validate --device cuda --out $W/validate --progress plain"
  step validate-sweep 180 "$v --disable-quantum --cycles 100 --max-split-size-mb none,128,512 --run-id sweep --no-plots --json > $W/validate-sweep.json"
  step validate-expandable 100 "$v --disable-quantum --cycles 100 --alloc-conf expandable_segments:True --run-id expandable --no-plots --json > $W/validate-expandable.json"
  step validate-emulate-4g 100 "$v --disable-quantum --cycles 50 --emulate-memory 4GiB --run-id emulate-4g --no-plots --json > $W/validate-emulate-4g.json"
  step validate-emulate-1g 100 "$v --disable-quantum --cycles 50 --emulate-memory 1GiB --run-id emulate-1g --no-plots --json > $W/validate-emulate-1g.json"
  step validate-script 150 "$v --disable-quantum --cycles 50 --run-id script --no-plots --json -- $PY bench/gpu/plain_train.py --steps {cycles} > $W/validate-script.json"
  # The reference workload sizes itself to the memory it is given, so a 4 GiB cap shows its
  # figures, not an OOM; a plain script of a fixed batch runs out and is re-run at half of it.
  step validate-script-oom 150 "$v --disable-quantum --cycles 30 --stage imports,smoke --emulate-memory 4GiB --batch 131072 --run-id script-oom --no-plots --json -- $PY bench/gpu/plain_train.py --steps {cycles} --batch {batch} > $W/validate-script-oom.json"
  local script="-- $PY bench/gpu/plain_train.py --steps {cycles}"
  step validate-script-sweep 150 "$v --disable-quantum --cycles 30 --stage imports,smoke,classical --max-split-size-mb none,128,512 --run-id script-sweep --no-plots --json $script > $W/validate-script-sweep.json"
  step validate-script-expandable 90 "$v --disable-quantum --cycles 30 --stage imports,smoke,classical --alloc-conf expandable_segments:True --run-id script-expandable --no-plots --json $script > $W/validate-script-expandable.json"
  # The default plan last, its cycles bounded: its full stage runs ~5 s a cycle on an H200.
  step validate-default 210 "$v --cycles 20 --run-id default --json > $W/validate-default.json"
}

phase_diag_bench() {
  step diag-1 90 "$GA diag --level 1 --out $W/reports"
  step check-diag-1 90 "$GA check --diag 1 --no-report"
  step time-real-scan 120 "$PY bench/gpu/time_real_scan.py --runs 10 --json-out $W/time_real_scan.json"
  step diag-2 180 "$GA diag --level 2 --out $W/reports --json > $W/diag-2.json"
  step diag-3 120 "$GA diag --level 3 --duration 45 --out $W/reports --json > $W/diag-3.json"
  step bench-validate 150 "$PY bench/bench_validate.py --device cuda --cycles 100 --repeats 2"
  step bench-monitor 90 "$PY bench/bench_monitor.py --publishes 500 --rounds 10"
  step bench-validate-script 120 "$PY bench/bench_validate_script.py --steps 100 --repeats 2"
  step bench-scan 120 "command -v cc && $PY bench/bench_scan.py --runs 5 --slow-runs 3"
}

phase_selftest() {
  step ok 30 "echo out; echo err >&2"
  step fails 30 "exit 7"
  step big-file 30 "head -c 2000000 /dev/urandom > $W/big.bin"
  step times-out 4 "sleep 30"
  step no-time-left 30 "echo never"
}

[ "$DRY" = 1 ] || setup
# The self-test checks the step runner alone: its budget starts after the set-up, whose time
# (importing torch for versions.txt) depends on how busy the machine is.
[ "$PHASE" = selftest ] && START=$(date +%s)
case "$PHASE" in
  truth) phase_truth ;;
  tests) phase_tests ;;
  validate) phase_validate ;;
  diag-bench) phase_diag_bench ;;
  selftest) phase_selftest ;;
esac
[ "$DRY" = 1 ] || pack
exit 0
