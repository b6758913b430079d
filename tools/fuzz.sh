#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, the `fuzz` CMake preset: clang, ASan + UBSan) and
# runs each one for a bounded time, starting from its seed corpus (tests/fuzz/corpus/<harness>).
#
#   tools/fuzz.sh                       # smoke: every harness 20 s
#   tools/fuzz.sh --seconds 600         # longer runs
#   tools/fuzz.sh --seconds 60 cron yaml   # only some harnesses
#   tools/fuzz.sh --no-build ...        # reuse build/fuzz as it is
#   tools/fuzz.sh --seed 1 --runs 20000 # as CI runs it: fixed seed and number of inputs,
#                                       # from the seed corpus only (a fresh work folder)
#
# Exits non-zero when any harness finds a crash, a leak, a timeout (> 10 s for one input), an
# out-of-memory (> 2 GiB) or a violated property; the reproducer's path is printed. Reproduce
# with `build/fuzz/tests/fuzz/fuzz_<harness> <reproducer>`; add the input to
# tests/fuzz/corpus/<harness>/ and a regression test to tests/unit/test_fuzz_regressions.cpp
# once the parser is fixed.
#
# New inputs found during a run go to build/fuzz/corpus/<harness> (kept between runs, never
# into the source tree); crash artifacts to build/fuzz/artifacts/<harness>/, logs to
# build/fuzz/logs/<harness>.log (<harness>.runs.log for a --runs run).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_HARNESSES=(yaml kubeconfig quantity cron watch tfcluster devinstance scheduledjob quota
  selector exec_credential dev_activity exec_channel base64 credentials_secret launcher)
seconds=20
build=1
seed=""
runs=""
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    --seconds=*) seconds="${1#--seconds=}"; shift ;;
    --no-build) build=0; shift ;;
    --seed) seed="${2:?--seed needs a value}"; shift 2 ;;
    --runs) runs="${2:?--runs needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds needs a positive integer, got '$seconds'" >&2
  exit 2
fi
for v in "$seed" "$runs"; do
  if [ -n "$v" ] && ! [[ "$v" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: --seed and --runs need a positive integer, got '$v'" >&2
    exit 2
  fi
done
# --runs: a fixed number of inputs (with --seed, the same inputs on every machine); the time
# bound stays as a safety net.
limits=(-max_total_time="$seconds")
bound=$seconds
what="${seconds}s"
if [ -n "$runs" ]; then
  bound=$((seconds > 600 ? seconds : 600))
  limits=(-runs="$runs" -max_total_time="$bound")
  what="$runs inputs"
fi
if [ -n "$seed" ]; then limits+=(-seed="$seed"); what="$what, seed $seed"; fi
if [ ${#harnesses[@]} -eq 0 ]; then harnesses=("${ALL_HARNESSES[@]}"); fi
for h in "${harnesses[@]}"; do
  case " ${ALL_HARNESSES[*]} " in
    *" $h "*) ;;
    *) echo "fuzz.sh: unknown harness '$h' (known: ${ALL_HARNESSES[*]})" >&2; exit 2 ;;
  esac
done

BUILD=build/fuzz
if [ $build -eq 1 ]; then
  echo "== fuzz: build (preset fuzz)"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz --target fuzz_all
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# How many entries a folder holds (libFuzzer's corpus and artifacts hold no hidden files).
entries() { find "$1" -mindepth 1 -maxdepth 1 -printf . | wc -c; }

failed=()
for h in "${harnesses[@]}"; do
  bin="$BUILD/tests/fuzz/fuzz_$h"
  seeds="tests/fuzz/corpus/$h"
  work="$BUILD/corpus/$h"
  if [ -n "$runs" ]; then
    # As on a fresh machine: only the seed corpus, never what earlier runs found.
    work="$BUILD/corpus-runs/$h"
    rm -rf "$work"
  fi
  artifacts="$BUILD/artifacts/$h"
  log="$BUILD/logs/$h.log"
  # A fixed-input run (CI's smoke) keeps its own log, so it never overwrites a long run's.
  if [ -n "$runs" ]; then log="$BUILD/logs/$h.runs.log"; fi
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  if [ ! -x "$bin" ]; then
    echo "fuzz.sh: $bin is missing (build with: cmake --build --preset fuzz)" >&2
    failed+=("$h")
    continue
  fi
  before=$(entries "$artifacts")
  echo "== fuzz: $h ($what)"
  status=0
  # max_total_time bounds the run; the outer timeout catches a harness that never returns to
  # libFuzzer's loop (libFuzzer's own -timeout reports single slow inputs as failures).
  timeout --kill-after=10 $((bound + 60)) "$bin" \
    "${limits[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$seeds" </dev/null >"$log" 2>&1 || status=$?
  stats=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1 || true)
  if [ $status -ne 0 ]; then
    failed+=("$h")
    echo "FAIL: fuzz_$h exited with $status after ${stats:-?} runs; log: $log"
    grep -E 'ERROR: |FUZZ PROPERTY VIOLATED|runtime error|SUMMARY' "$log" | head -5 || true
    if [ "$(entries "$artifacts")" -gt "$before" ]; then
      # shellcheck disable=SC2012  # newest first (ls -t); libFuzzer's names are one word each
      for f in $(ls -t "$artifacts" | head -3); do
        echo "  reproducer: $artifacts/$f  (run: $bin $artifacts/$f)"
      done
    elif [ $status -eq 124 ] || [ $status -eq 137 ]; then
      echo "  the harness did not stop in time"
    fi
  else
    echo "ok: fuzz_$h, ${stats:-?} runs, corpus $(entries "$work") files"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: all ${#harnesses[@]} harnesses ran ($what each) without a finding"
