#!/usr/bin/env bash
# Long runs of the fuzz targets, in the sanitized build (scripts/test-sanitized.sh
# makes build-san/), two at a time:
#   scripts/fuzz.sh SECONDS [TARGET...]      (default: every target built)
# New inputs stay in build-san/tests/fuzz/scratch/<target>/, a crashing input
# in build-san/tests/fuzz/artifacts/; each run's log in
# build-san/tests/fuzz/logs/<target>.log. Prints, per target, what
# docs/testing.md records: runs, coverage (cov), features (ft), corpus, crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-san/tests/fuzz
seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
if ((${#targets[@]} == 0)); then
  for run in "$dir"/run-*.sh; do
    t=${run##*/run-}
    targets+=("${t%.sh}")
  done
fi
((${#targets[@]})) || { echo "no fuzz targets in $dir: run scripts/test-sanitized.sh first" >&2; exit 1; }
mkdir -p "$dir/logs"
for t in "${targets[@]}"; do echo "$t"; done |
  xargs -P 2 -I{} sh -c "'$dir/run-{}.sh' -max_total_time=$seconds > '$dir/logs/{}.log' 2>&1; echo \$? > '$dir/logs/{}.status'"
status=0
printf '%-22s %12s %8s %8s %8s %8s  %s\n' target runs exec/s cov ft corpus crashes
for t in "${targets[@]}"; do
  log=$dir/logs/$t.log
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  field() { sed -nE "s/.* $1: ([0-9]+).*/\\1/p" <<<"$last"; }
  runs=$(sed -nE 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -nE 's/^stat::average_exec_per_sec: *//p' "$log")
  crashes=$(grep -c 'Test unit written to' "$log" || true)  # crash, leak, timeout or OOM input kept
  printf '%-22s %12s %8s %8s %8s %8s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "$(field cov)" "$(field ft)" \
    "$(field corp)" "$crashes (exit $(cat "$dir/logs/$t.status"))"
  [[ $(cat "$dir/logs/$t.status") == 0 ]] || status=1
done
exit $status
