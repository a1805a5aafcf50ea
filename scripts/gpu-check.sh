#!/usr/bin/env bash
# One call on a GPU machine: build everything for the GPU (sm_90 by default) from the staged
# dependencies, run the whole test suite (host and CUDA), compute-sanitizer (memcheck, racecheck) on
# the CUDA tests, the CUDA examples, and the benchmarks. Logs go to $OUT (or ./gpu-out): build, ctest,
# sanitizer and one file per benchmark (the device tool brings back 8 files).
#   ../shared/tools/stage-deps.sh .   # once, on the development machine: fills .deps/
#   scripts/gpu-check.sh [arch] [bench-scale]
set -uo pipefail
arch=${1:-90}
scale=${2:-1}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
status=0
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv

deps=()
[ -d .deps ] && deps=(-DCMAKE_PREFIX_PATH="$PWD/.deps" -DH2EXPR_GTEST_SOURCE_DIR="$PWD/.deps/src/googletest")
# The build log stays on the machine (its tail is printed on failure): $OUT keeps room for the benchmarks.
mkdir -p build-gpu
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" "${deps[@]}" \
  > build-gpu/build.log 2>&1 || { tail -30 build-gpu/build.log; exit 1; }
cmake --build build-gpu -j "$(nproc)" >> build-gpu/build.log 2>&1 || { grep -E "error" -A5 build-gpu/build.log | head -60; exit 1; }

echo "=== tests"
ctest --test-dir build-gpu --output-on-failure -j 4 > "$out/ctest.log" 2>&1 || status=1
grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/ctest.log" | tail -25

echo "=== compute-sanitizer"
for t in build-gpu/tests/test_*_cuda; do
  for tool in memcheck racecheck; do
    extra=(); [ "$tool" = memcheck ] && extra=(--leak-check full)
    log=$(mktemp)
    # The intentional 8 TB allocation would be reported as an API error: it runs in ctest above.
    if compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 "$t" --gtest_filter=-*out_of_memory* \
        > "$log" 2>&1; then
      echo "$tool $(basename "$t"): clean ($(grep -c "\[       OK \]" "$log") tests run)"
    else
      echo "$tool $(basename "$t"): FAILED"; status=1
      grep -E "ERROR SUMMARY|Invalid|Race|FAILED" "$log" | head -10
    fi
    { echo "### $tool $(basename "$t")"; cat "$log"; } >> "$out/sanitizer.log"
    rm -f "$log"
  done
done

echo "=== examples"
build-gpu/examples/demo_cuda || status=1
build-gpu/examples/low_rank_batch_cuda || status=1
build-gpu/examples/square_kernel_cuda || status=1
build-gpu/examples/expression_algebra_cuda || status=1
build-gpu/examples/schur_complement_cuda 1024 2 || status=1
build-gpu/examples/schur_complement_cuda 32 3 || status=1

echo "=== benchmarks"
for b in build-gpu/benchmarks/bench_*_cuda; do
  args=()  # batched and ARA take a batch-size scale; the others their own sizes
  case "$(basename "$b")" in bench_batched_cuda | bench_ara_cuda) args=("$scale") ;; esac
  "$b" "${args[@]}" > "$out/$(basename "$b").txt" 2>&1 || status=1
  cat "$out/$(basename "$b").txt"
done
exit $status
