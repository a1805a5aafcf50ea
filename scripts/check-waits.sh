#!/usr/bin/env bash
# Where the algorithms wait for the stream (README, "memory"): buffers are freed in stream order and
# transfers to the host wait by themselves, so synchronize() belongs to the backends (core/, primitives/)
# and to MPI's messages (distributed/communicator.hpp); algorithm code may call it where the host reads a
# result (a timing report), at most `limit` times in all. Exits 1 and names every call past the limit.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=5
calls=$(grep -rn 'synchronize()' detail/h2expr/detail --include='*.hpp' --include='*.cuh' \
          | grep -v -E '^detail/h2expr/detail/(core|primitives)/|^detail/h2expr/detail/distributed/communicator\.hpp:' \
          | grep -v -E '^[^:]+:[0-9]+:[[:space:]]*//' || true)
count=$( [ -z "$calls" ] && echo 0 || printf '%s\n' "$calls" | wc -l)
if [ "$count" -gt "$limit" ]; then
  echo "waits: $count synchronize() calls in algorithm code, at most $limit:"
  printf '%s\n' "$calls"
  exit 1
fi
echo "waits: $count synchronize() call(s) in algorithm code (at most $limit)"
[ -n "$calls" ] && printf '%s\n' "$calls"
exit 0
