#!/bin/bash
# What a bag costs `arm_hil sil` on the default arc, in wall time. Runs with and without `--bag`
# alternate, so that this machine's drift from one minute to the next (a fifth of its speed)
# falls on both alike; prints the medians and the median of the pairs' ratios.
#   cargo build --release && benches/bag_overhead.sh [PAIRS] [MORE ARGUMENTS OF THE BAG RUN...]
set -eu
pairs="${1:-60}"
shift $(($# > 0 ? 1 : 0))
binary="${ARM_HIL:-target/release/arm_hil}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
microseconds() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null 2>&1
  end=$(date +%s%N)
  echo $(((end - start) / 1000))
}
for _ in 1 2 3 4 5; do "$binary" sil >/dev/null 2>&1; done
for _ in $(seq "$pairs"); do
  rm -rf "$dir/bag"
  echo "$(microseconds "$binary" sil) $(microseconds "$binary" sil --bag "$dir/bag" "$@")"
done >"$dir/pairs"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
without=$(cut -d' ' -f1 "$dir/pairs" | median)
with=$(cut -d' ' -f2 "$dir/pairs" | median)
ratio=$(awk '{ print $2 / $1 }' "$dir/pairs" | median)
awk -v n="$pairs" -v a="$without" -v b="$with" -v r="$ratio" 'BEGIN {
  printf "%d pairs: sil %.1f ms, sil --bag %.1f ms (medians); with/without %.3f (median of the pairs)\n", n, a / 1000, b / 1000, r
}'
