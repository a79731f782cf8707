#!/usr/bin/env bash
# Runs the default arc N times through the emulated reference rig, as the lab runs it on its robot
# PC, and prints each run's outcome and RMS tracking error, then the distribution.
#
# Usage: tools/hil_under_load.sh idle|busy|paused [RUNS] [extra `arm_hil hil` arguments]
#   idle    nothing else runs
#   busy    two busy processes, one per core of a 2-core machine, for the whole batch
#   paused  the `arm_hil hil` process stopped for 20 ms every 300 ms (SIGSTOP / SIGCONT), as a
#           busy host pauses a virtual machine
# Each run gets a fresh `arm_hil emulate sensor` (the rig; it runs on, unpaused, as hardware does).
# HIL_CONFIG names the configuration (default examples/robotscara.yaml). Needs
# target/release/arm_hil (cargo build --release). Prints one JSON line a run, then a
# summary line: `runs N, ok K, protective stops P, lost L, RMS mm: min .. median .. max`.
set -euo pipefail
set -m
cd "$(dirname "$0")/.."
condition="${1:?usage: tools/hil_under_load.sh idle|busy|paused [RUNS] [hil arguments]}"
runs="${2:-20}"
shift $(( $# >= 2 ? 2 : 1 ))
bin=target/release/arm_hil
[ -x "$bin" ] || { echo "build it first: cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$condition" = busy ]; then
  for _ in 1 2; do
    sh -c 'while :; do :; done' &
    pids+=($!)
  done
fi

results="$work/results"
: > "$results"
for run in $(seq 1 "$runs"); do
  "$bin" emulate sensor > "$work/rig" 2> "$work/rig.err" &
  rig=$!
  pids+=("$rig")
  for _ in $(seq 100); do [ "$(wc -l < "$work/rig")" -ge 2 ] && break; sleep 0.05; done
  sensor=$(awk '$1 == "sensor" {print $2}' "$work/rig")
  stepper=$(awk '$1 == "stepper" {print $2}' "$work/rig")
  "$bin" hil --hardware robotscara --sensor "$sensor" --arduino "$stepper" \
    --config "${HIL_CONFIG:-examples/robotscara.yaml}" --json "$@" > "$work/run.json" 2> "$work/run.err" &
  hil=$!
  pids+=("$hil")
  if [ "$condition" = paused ]; then
    while kill -0 "$hil" 2>/dev/null; do
      sleep 0.28
      kill -STOP "$hil" 2>/dev/null || break
      sleep 0.02
      kill -CONT "$hil" 2>/dev/null || break
    done
  fi
  wait "$hil" || true
  kill -INT "$rig" 2>/dev/null || true
  wait "$rig" 2>/dev/null || true
  line=$(tail -1 "$work/run.json")
  [ -n "$line" ] || line="{\"outcome\": \"no summary: $(tail -1 "$work/run.err" | tr '"' "'")\"}"
  rig_said=$(grep -i "hard stop" "$work/rig" "$work/rig.err" | head -1 | tr '"' "'" || true)
  echo "$line" | python3 -c '
import json, sys
run = json.load(sys.stdin)
run["run"] = int(sys.argv[1])
if sys.argv[2]:
    run["rig"] = sys.argv[2]
print(json.dumps(run))' "$run" "$rig_said" | tee -a "$results"
done

python3 - "$results" "$condition" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
rms = sorted(r["rms_error_m"] * 1e3 for r in runs if "rms_error_m" in r)
ok = sum(r.get("outcome") == "ok" for r in runs)
stops = sum(r.get("outcome") == "protective_stop" for r in runs)
lost = sum("rig" in r for r in runs)
spread = f"{rms[0]:.2f} .. {statistics.median(rms):.2f} .. {rms[-1]:.2f}" if rms else "-"
print(f"{sys.argv[2]}: runs {len(runs)}, ok {ok}, protective stops {stops}, lost {lost}, RMS mm: min .. median .. max {spread}")
PY
