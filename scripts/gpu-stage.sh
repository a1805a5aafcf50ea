#!/usr/bin/env bash
# Builds the CUDA programs (tests, examples, benchmarks) on this machine, which needs the CUDA toolkit but
# no GPU, and stages them, stripped and packed, in .gpubin/programs.tar.xz for scripts/gpu-check.sh (GPU_CHECK_PREBUILT=.gpubin):
# the device's minutes then go to running them, not to compiling (the H100 run of 0805b02 spent 127 of
# its 536 s building). Configured as the device machine would be: no CHOLMOD, OpenBLAS or MPI there, so
# the programs need only the C/C++ runtime, OpenMP and the CUDA libraries. Uses .deps/ from
# ../shared/tools/stage-deps.sh.
#   scripts/gpu-stage.sh [arch]     (then carry .gpubin and .deps)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-90}
build=${GPU_STAGE_BUILD:-build-gpu-stage}
[ -d .deps ] || { echo "no .deps/: run ../shared/tools/stage-deps.sh . first"; exit 1; }
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DH2EXPR_BUILD_BENCHMARKS=ON \
  -DH2EXPR_USE_CHOLMOD=OFF -DH2EXPR_USE_OPENBLAS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DCMAKE_PREFIX_PATH="$PWD/.deps" -DH2EXPR_GTEST_SOURCE_DIR="$PWD/.deps/src/googletest" > /dev/null
targets=$(ninja -C $build -t targets all | sed -n 's/^\([A-Za-z0-9_]*_cuda\): phony$/\1/p' | grep -v '^h2expr_')
ninja -C $build $targets
# Stripped and packed (83 MB of programs -> 8 MB of xz: the device tool carries 64 MiB in all).
stage=$(mktemp -d)
mkdir -p "$stage/tests" "$stage/examples" "$stage/benchmarks"
for dir in tests examples benchmarks; do
  for f in $build/$dir/*_cuda; do [ -x "$f" ] && strip -o "$stage/$dir/$(basename "$f")" "$f"; done
done
rm -rf .gpubin && mkdir -p .gpubin
tar -C "$stage" -cf - tests examples benchmarks | xz -T0 -6 > .gpubin/programs.tar.xz
rm -rf "$stage"
# What gpu-check.sh compares with its tree: the full commit, local changes to what the programs are built
# from (results and scripts aside), the architecture.
changes=$(git status --porcelain -- include detail tests examples benchmarks CMakeLists.txt cmake ':!benchmarks/results')
echo "commit $(git rev-parse HEAD)${changes:+ + local changes}, sm_$arch, built $(date -u +%F)" > .gpubin/BUILT
grep -qxF '.gpubin/' .gitignore || echo "note: add '.gpubin/' to .gitignore"
du -sh .gpubin
