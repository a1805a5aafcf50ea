#!/bin/sh
# A compiler launcher (CMAKE_CXX_COMPILER_LAUNCHER / CMAKE_CUDA_COMPILER_LAUNCHER) that runs each
# compile under GNU time and appends "seconds peak-KB object" to $H2EXPR_COMPILE_LOG, so that CI can
# report the slowest and the largest compile. Chains ccache when that is installed.
out=unknown prev=
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
launcher=
command -v ccache >/dev/null 2>&1 && launcher=ccache && export CCACHE_SLOPPINESS=pch_defines,time_macros  # see CMakeLists.txt
exec /usr/bin/time -a -o "${H2EXPR_COMPILE_LOG:-/dev/null}" -f "%e %M $out" $launcher "$@"
