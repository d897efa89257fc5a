#!/usr/bin/env bash
# callgrind-h2.sh — Legate's user-space instructions per request on the HTTP/2 rig's load:
# h2load -c16 -m10 over h2c (prior knowledge) to Legate (--concurrency 1, under callgrind)
# proxying to an HTTP/1.1 nginx upstream (100-byte body). Instruction counts repeat from run
# to run within a few per cent where req/s on this shared machine does not.
#
# Usage: bench/callgrind-h2.sh BIN NAME   (N=20000 requests measured, after 2000 unmeasured)
# Knobs: N, BASE_PORT=27510 (uses BASE_PORT..+3), OUT=/tmp/callgrind-h2
# Output: $OUT/NAME.cg.* (callgrind_annotate it); last line: NAME total=... per_req=...
set -euo pipefail
BENCH=callgrind-h2
. "$(dirname "$0")/lib.sh"
BIN=$1 NAME=$2 N=${N:-20000} OUT=${OUT:-/tmp/callgrind-h2}
B=${BASE_PORT:-27510}; UP=$B LEG=$((B + 2)) ADMIN=$((B + 3))
need_tools nginx:nginx h2load:nghttp2-client valgrind:valgrind curl:curl taskset:util-linux
ports_free "$UP" "$LEG" "$ADMIN"
mkdir -p "$OUT"
workdir
upstream_conf "$UP"
legate_yaml "$ADMIN" "$LEG" "$UP"
start 1 nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
# No asynchronous preemption: its signals would make the counts vary.
GODEBUG=asyncpreemptoff=1 start 0 valgrind --tool=callgrind --callgrind-out-file="$OUT/$NAME.cg" \
  "$BIN" -c "$W/legate.yaml" --concurrency 1 --disable-hot-restart
LEG_PID=$PID
ready "$LEG" || skip "Legate did not answer on :$LEG"
h2load -n 2000 -c16 -m10 "http://127.0.0.1:$LEG/" >/dev/null
callgrind_control -z "$LEG_PID" >/dev/null 2>&1
h2load -n "$N" -c16 -m10 "http://127.0.0.1:$LEG/" | grep -E 'requests:|status codes' >&2
callgrind_control -d "$LEG_PID" >/dev/null 2>&1
sleep 1
f=$(ls -t "$OUT/$NAME".cg.* | head -1)
tot=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$NAME file=$f total=$tot per_req=$((tot / N)) load=$(cut -d' ' -f1 /proc/loadavg)"
