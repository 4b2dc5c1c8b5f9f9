#!/usr/bin/env bash
# gpu-audit scan beside nvidia-smi and torch while a monitored CUDA training loop runs.
#
#   PY=python3 bash bench/gpu/live_scan.sh DIR
#
# Starts bench/gpu/train_monitored.py in the background, waits until its monitor has
# published, then takes nvidia-smi -q -x, gpu-audit scan --json and the scan's terminal view,
# compares the scan with nvidia-smi (nvsmi_compare.py) and with torch's own figures
# (allocator_vs_torch.py), stops the loop and waits for it. Everything lands in DIR.
# Exit: the worst of the two comparisons (0 agree, 1 disagree, 3 could not compare).
set -u
D=$1
PY=${PY:-python3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 3
mkdir -p "$D"
rm -f "$D/ready" "$D/stop"
"$PY" bench/gpu/train_monitored.py --seconds 100 --interval 1 --ready "$D/ready" \
  --figures "$D/figures.jsonl" --stop "$D/stop" >"$D/trainer.out" 2>&1 &
trainer=$!
for _ in $(seq 1 90); do
  [ -s "$D/ready" ] && break
  kill -0 "$trainer" 2>/dev/null || break
  sleep 1
done
if [ ! -s "$D/ready" ]; then
  echo "the training loop never published; its output:"
  cat "$D/trainer.out"
  touch "$D/stop"
  wait "$trainer"
  exit 3
fi
nvidia-smi -q -x >"$D/smi.xml" 2>&1
"$PY" -m gpu_audit scan --json --no-report >"$D/scan.json" 2>"$D/scan.err"
"$PY" -m gpu_audit scan --no-report >"$D/scan.txt" 2>&1
echo "--- nvsmi_compare (live)"
"$PY" bench/gpu/nvsmi_compare.py "$D/smi.xml" "$D/scan.json" --json-out "$D/compare.json" \
  --quiet
compare=$?
echo "--- allocator_vs_torch"
"$PY" bench/gpu/allocator_vs_torch.py "$D/scan.json" "$D/figures.jsonl" "$trainer"
allocator=$?
touch "$D/stop"
wait "$trainer"
echo "trainer exit $?: $(tail -n 1 "$D/trainer.out")"
echo "--- scan terminal view"
cat "$D/scan.txt"
exit $((compare > allocator ? compare : allocator))
