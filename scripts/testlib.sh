# Sourced by scripts/test.sh and scripts/test-sanitized.sh.
#
# run_ctest NAME DIR [CTEST ARGS...]: runs CTest in DIR with the parallel
# level of AIRLOCK_TEST_JOBS (default: twice the cores; kernel tests mostly
# wait on the kernel, on processes and on the network), its output on the
# terminal and in DIR/test-logs/NAME.log. Its counts are appended to
# $AIRLOCK_TEST_COUNTS (one line: NAME passed failed) for the closing line.
AIRLOCK_TEST_JOBS=${AIRLOCK_TEST_JOBS:-$(($(nproc) * 2))}

run_ctest()
{
  local name=$1 dir=$2
  shift 2
  mkdir -p "$dir/test-logs"
  local log="$dir/test-logs/$name.log" status=0 t0=$SECONDS
  (cd "$dir" && ctest --output-on-failure -j"$AIRLOCK_TEST_JOBS" "$@") 2>&1 | tee "$log" || status=$?
  # ctest's own summary: "NN% tests passed, F tests failed out of T".
  local line total failed
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  if [[ -n $line ]]; then
    total=${line##* out of }
    failed=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
  elif grep -q 'No tests were found' "$log"; then
    total=0 failed=0
  else
    total=1 failed=1  # ctest itself failed
  fi
  if [[ -n ${AIRLOCK_TEST_COUNTS:-} ]]; then
    echo "$name $((total - failed)) $failed $((SECONDS - t0))" >>"$AIRLOCK_TEST_COUNTS"
  fi
  return $status
}
