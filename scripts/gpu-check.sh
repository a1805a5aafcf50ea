#!/usr/bin/env bash
# One call on a GPU machine, inside a time budget: build the CUDA targets for the GPU (sm_90 by
# default) from the staged dependencies, run every CUDA test binary, compute-sanitizer (memcheck on all,
# racecheck on the suites of the shared-memory kernels) on them, the CUDA examples, and the benchmarks at
# sizes that fit. Host tests are CI's job.
#   ../shared/tools/stage-deps.sh .   # once, on the development machine: fills .deps/ (carry it)
#   scripts/gpu-stage.sh              # optional: builds the CUDA programs here (no GPU needed) into .gpubin/
#   GPU_CHECK_PREBUILT=.gpubin scripts/gpu-check.sh [arch] [budget seconds]   # carry .gpubin and .deps
# With GPU_CHECK_PREBUILT, the programs built on the development machine run as they are (the device's
# minutes go to running, not compiling); where one of them cannot start there (a missing library), the
# script falls back to building from the sources with .deps.
# Writes under $OUT (or ./gpu-out), at most 8 files (the device tool's limit): summary.txt (what
# passed, what failed, what ran out of time), build.log, tests.log, sanitizer.log, examples.log,
# bench.txt. Every stage has a deadline, so a slow stage costs the later ones time, not the whole run.
# memcheck and racecheck run beside the tests and the second build step, in one window, in shards
# (GTest's own sharding) so that the long suites do not run alone at the end; examples and benchmarks
# are then timed on a quiet GPU.
set -uo pipefail
arch=${1:-90}
budget=${2:-560}
t0=$SECONDS
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
summary=$out/summary.txt
say() { echo "$*" | tee -a "$summary"; }
left() { echo $((budget - (SECONDS - t0))); }
stamp() { say "--- $1 at $((SECONDS - t0)) s"; }
status=0

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee -a "$summary"
say "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, budget ${budget} s"

prebuilt=${GPU_CHECK_PREBUILT:-}
if [ -n "$prebuilt" ] && [ -f "$prebuilt/programs.tar.xz" ]; then
  tar -C "$prebuilt" -xJf "$prebuilt/programs.tar.xz" 2>/dev/null ||
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$prebuilt/programs.tar.xz" "$prebuilt"
fi
if [ -n "$prebuilt" ]; then
  # Usable when every library the programs need is found here and a test program starts.
  missing=$(for f in "$prebuilt"/*/*_cuda; do ldd "$f" | grep "not found"; done | sort -u)
  if [ -z "$missing" ] && "$prebuilt/tests/test_matrix_cuda" --gtest_list_tests > /dev/null 2>&1; then
    say "prebuilt programs from $prebuilt: $(cat "$prebuilt/BUILT" 2>/dev/null)"
    built=$(sed -n 's/^commit \([0-9a-f]*\).*/\1/p' "$prebuilt/BUILT" 2>/dev/null)
    [ -n "$built" ] && [ "$built" = "$(git rev-parse HEAD 2>/dev/null)" ] ||
      say "WARNING: the programs were built from commit ${built:-unknown}, not from this tree's HEAD"
    grep -q "local changes" "$prebuilt/BUILT" && say "WARNING: the programs were built with uncommitted changes"
    grep -q "sm_$arch," "$prebuilt/BUILT" || say "WARNING: the programs were not built for sm_$arch"
  else
    say "prebuilt programs unusable here (${missing:-test_matrix_cuda does not start}); building from the sources"
    prebuilt=""
  fi
fi

if [ -n "$prebuilt" ]; then
  build=$prebuilt
  test_targets=$(cd "$build/tests" && ls | grep -E '^test_.*_cuda$' | grep -E "${GPU_CHECK_TARGETS:-.}")
  build2=""
else
  deps=()
  [ -d .deps ] && deps=(-DCMAKE_PREFIX_PATH="$PWD/.deps" -DH2EXPR_GTEST_SOURCE_DIR="$PWD/.deps/src/googletest")
  build=${GPU_CHECK_BUILD:-build-gpu}  # (both overridable, to try the script on a machine without a GPU)
  filter=${GPU_CHECK_TARGETS:-.}
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DH2EXPR_BUILD_BENCHMARKS=ON "${deps[@]}" \
    > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  all_targets=$(ninja -C $build -t targets all | sed -n 's/^\([A-Za-z0-9_]*_cuda\): phony$/\1/p' | grep -E "$filter")
  test_targets=$(echo "$all_targets" | grep '^test_')
  other_targets=$(echo "$all_targets" | grep -v '^test_\|^h2expr_')
  stamp "build tests"
  ninja -C $build -j "$(nproc)" $test_targets >> "$out/build.log" 2>&1 ||
    { say "BUILD FAILED"; grep -E "error" -A5 "$out/build.log" | head -60; exit 1; }
  stamp "tests built"

  # The rest builds while the tests and the sanitizer run.
  ninja -C $build -j "$(( $(nproc) > 8 ? $(nproc) / 2 : $(nproc) ))" $other_targets > "$build/build2.log" 2>&1 &
  build2=$!
fi

tests=$(for t in $test_targets; do echo $build/tests/$t; done)
# The tests and memcheck share one window, all that is left but about 300 s for the examples and the
# benchmarks (the H200 run: test_ara_cuda and test_solvers_cuda need over 240 s beside the sanitizers).
window=$(( $(left) - 300 )); [ $window -gt 320 ] && window=320
[ $window -lt 60 ] && { say "only $window s left for the tests: they get 60 s, the benchmarks less"; window=60; }
mkdir -p $build/testlogs
# One OpenMP thread per test process (as ctest gives the host suites): the drivers' Eigen references
# would otherwise start 16 threads each beside 30-odd sanitizer processes (a lead for the ARA test's
# 141-175 s on the GPU machines, against 4 s on the 2-core host).
for t in $tests; do
  OMP_NUM_THREADS=1 timeout "$window" "$t" > "$build/testlogs/$(basename "$t").log" 2>&1 &
done

# compute-sanitizer (it is CPU-bound): every binary at once, the longer ones in GTest shards (one per
# 8 tests) so that the cores stay busy to the end, beside the tests and the second build step. A run
# cut by its limit reports how many tests it finished clean.
rm -rf "$build/sanitized" && mkdir -p "$build/sanitized"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
sanitize() {  # sanitize <tool> <binary> <seconds> <shard> <shards>
  local tool=$1 t=$2 secs=$3 shard=$4 shards=$5 name
  name="$(basename "$2")"; [ "$shards" -gt 1 ] && name+=" shard $((shard + 1))/$shards"
  local item="$build/sanitized/$tool.$(basename "$t").$shard"
  local extra=(); [ "$tool" = memcheck ] && extra=(--leak-check full)
  # The intentional 8 TB allocation is left out: it runs in the tests above, and the sanitizer
  # reports its failed cudaMalloc as an API error.
  OMP_NUM_THREADS=1 GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard timeout "$secs" "$sanitizer" --tool "$tool" "${extra[@]}" \
    --error-exitcode 9 "$t" --gtest_filter=-*out_of_memory* > "$item.log" 2>&1
  local rc=$? ran; ran=$(grep -c "\[       OK \]" "$item.log")
  case $rc in
    0) echo "$tool $name: clean ($ran tests run)" > "$item" ;;
    124) echo "$tool $name: cut at $secs s ($ran tests clean before)" > "$item" ;;
    *) { echo "$tool $name: FAILED (rc $rc, $ran tests run)"
         grep -E "ERROR SUMMARY|Invalid|Race|Hazard|FAILED|Program hit" "$item.log" | head -12; } > "$item" ;;
  esac
}
shards_of() {  # one shard per 8 tests, at most 4 (about 35 processes on 16 cores)
  local n; n=$("$1" --gtest_list_tests 2>/dev/null | grep -c "^  ")
  n=$(( (n + 7) / 8 )); [ $n -lt 1 ] && n=1; [ $n -gt 4 ] && n=4; echo $n
}
sanitize_all() {  # sanitize_all <tool> <seconds> [binaries regex]: every (matching) binary at once
  [ "$2" -lt 20 ] && return
  for t in $(echo "$tests" | grep -E "${3:-.}"); do
    local k shards; shards=$(shards_of "$t")
    for ((k = 0; k < shards; ++k)); do sanitize "$1" "$t" "$2" $k $shards & done
  done
  wait
}
sanitizer_logs() {  # sanitizer_logs <tool>: its runs' logs into sanitizer.log (after every run ended)
  for f in "$build/sanitized/$1".*.log; do
    [ -e "$f" ] || continue
    { echo "### $1 $(basename "$f" .log)"; grep -v "^\[ RUN\|^\[       OK" "$f" | head -200; } >> "$out/sanitizer.log"
  done
}
# Racecheck, beside memcheck, on the suites of the own kernels that share memory between threads (gemm
# tiles, QR/SVD/Cholesky, BSR; HiSparse's).
memcheck_secs=$window
sanitize_all memcheck $memcheck_secs &
sanitize_all racecheck $memcheck_secs 'batched|hisparse' &

if [ -n "$build2" ]; then
  wait $build2; b2=$?
  cat "$build/build2.log" >> "$out/build.log"
  [ $b2 -eq 0 ] || { say "BUILD of examples/benchmarks FAILED"; status=1; grep -E "error" -A5 "$out/build.log" | tail -40; }
  stamp "examples and benchmarks built"
fi
wait  # the tests, memcheck and racecheck
sanitizer_logs memcheck
sanitizer_logs racecheck
stamp "tests and sanitizers done"
say "=== tests"
for t in $tests; do
  f="$build/testlogs/$(basename "$t").log"
  { echo "### $(basename "$t")"; cat "$f"; } >> "$out/tests.log"
  line=$(grep -E "^\[  PASSED  \]|^\[  FAILED  \].*tests, listed|^\[  SKIPPED \] [0-9]+ test" "$f" | tr '\n' ' ')
  if grep -q "^\[  PASSED  \]" "$f" && ! grep -q "^\[  FAILED  \]" "$f"; then say "$(basename "$t"): $line"
  else say "$(basename "$t"): FAILED $line"; grep -E "^\[  FAILED  \] [a-z]" "$f" | sort -u | head -20 | tee -a "$summary"; tail -3 "$f" | tee -a "$summary"; status=1; fi
done

run() {  # run <log> <seconds> <command...>: line-buffered, so that a cut run keeps what it printed
  local log=$1 secs=$2; shift 2
  [ "$(left)" -lt 30 ] && { say "skipped (no time): $*"; return; }
  [ "$secs" -gt "$(($(left) - 20))" ] && secs=$(($(left) - 20))
  echo "### $* (limit $secs s)" >> "$log"
  local s=$SECONDS
  timeout "$secs" stdbuf -oL -eL "$@" >> "$log" 2>&1
  local rc=$?
  say "$(basename "$1") ${*:2}: rc $rc, $((SECONDS - s)) s"
  [ $rc -eq 0 ] || status=1
}
say "=== examples"
ex=$out/examples.log
run "$ex" 40 $build/examples/demo_cuda
run "$ex" 30 $build/examples/low_rank_batch_cuda
run "$ex" 40 $build/examples/square_kernel_cuda
run "$ex" 40 $build/examples/expression_algebra_cuda
run "$ex" 40 $build/examples/schur_complement_cuda 1024 2
run "$ex" 40 $build/examples/schur_complement_cuda 32 3
run "$ex" 40 $build/examples/schur_complement_cuda 1024 2 1e-4 hisparse
run "$ex" 60 $build/examples/gaussian_process_cuda 64
say "=== benchmarks"
b=$out/bench.txt
run "$b" 75 $build/benchmarks/bench_hara_cuda 16 3 0 1e-4 verbose  # TARGETS.md's rows alone, hara's lines as it runs
run "$b" 30 $build/benchmarks/bench_compress_cuda 18
run "$b" 30 $build/benchmarks/bench_ara_cuda 0.5
run "$b" 45 $build/benchmarks/bench_schur_cuda 256,512,1024
run "$b" 30 $build/benchmarks/bench_hisparse_cuda 1 256
[ "$(left)" -gt 80 ] && run "$b" $(( $(left) - 30 )) $build/benchmarks/bench_inverse_cuda 12 12

say "=== compute-sanitizer"
for tool in memcheck racecheck; do
  for t in $tests; do
    items=$(ls "$build/sanitized/$tool.$(basename "$t")".? 2>/dev/null)
    if [ -n "$items" ]; then for item in $items; do cat "$item" | tee -a "$summary"; grep -q "FAILED" "$item" && status=1; done
    else say "$tool $(basename "$t"): not run (no time)"; fi
  done
done
stamp "end, status $status"
exit $status
