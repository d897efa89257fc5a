#!/usr/bin/env bash
# callgrind.sh — Legate's user-space instructions per request on a rig's load, Legate
# (--concurrency 1, under callgrind) proxying to an HTTP/1.1 nginx upstream (100-byte body):
#   PROTO=h2 (default): h2load -c16 -m10 over h2c (prior knowledge), as peers-h2-tls.sh's h2 round;
#   PROTO=h1: h2load --h1 -c64 keep-alive, as ../shared/bench/proxy-peers.sh;
#   PROTO=tls: h2load --h1 -c64 keep-alive over HTTPS (a self-signed certificate made in the work
#   dir), as peers-h2-tls.sh's tls round; the suite negotiated (TLS 1.3 TLS_AES_128_GCM_SHA256 on
#   AES hardware) is printed with the result.
# Instruction counts repeat from run to run within a few per cent where req/s on this shared
# machine does not.
#
# Usage: [PROTO=h1] bench/callgrind.sh BIN NAME   (N=20000 requests measured, after 2000 unmeasured)
# Knobs: N, PROTO, BASE_PORT=27510 (uses BASE_PORT..+3), OUT=/tmp/callgrind-$PROTO
# Output: $OUT/NAME.cg.* (callgrind_annotate it); last line: NAME total=... per_req=...
# (PROTO=tls adds steady=..., per request without the connections' handshakes)
set -euo pipefail
BENCH=callgrind
. "$(dirname "$0")/lib.sh"
BIN=$1 NAME=$2 N=${N:-20000} PROTO=${PROTO:-h2}
OUT=${OUT:-/tmp/callgrind-$PROTO}
SCHEME=http
case $PROTO in
h2) LOAD=(-c16 -m10) ;;
h1) LOAD=(--h1 -c64) ;;
tls) LOAD=(--h1 -c64) SCHEME=https ;;
*) echo "PROTO=$PROTO: want h1, h2 or tls" >&2; exit 2 ;;
esac
B=${BASE_PORT:-27510}; UP=$B LEG=$((B + 2)) ADMIN=$((B + 3))
need_tools nginx:nginx h2load:nghttp2-client valgrind:valgrind curl:curl taskset:util-linux openssl:openssl
ports_free "$UP" "$LEG" "$ADMIN"
mkdir -p "$OUT"
workdir
upstream_conf "$UP"
CERT=()
if [[ $SCHEME == https ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1 || skip "openssl could not make a certificate"
  CERT=("$W/cert.pem" "$W/key.pem")
fi
legate_yaml "$ADMIN" "$LEG" "$UP" "${CERT[@]}"
start 1 nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
# No asynchronous preemption: its signals would make the counts vary.
GODEBUG=asyncpreemptoff=1 start 0 valgrind --tool=callgrind --callgrind-out-file="$OUT/$NAME.cg" \
  "$BIN" -c "$W/legate.yaml" --concurrency 1 --disable-hot-restart
LEG_PID=$PID
READY_WAIT=${READY_WAIT:-90} ready "$LEG" "$SCHEME" || skip "Legate did not answer on :$LEG"
URL="$SCHEME://127.0.0.1:$LEG/"
h2load -n 2000 "${LOAD[@]}" "$URL" >/dev/null
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }
# measure N: the instructions of N requests (each dump also zeroes the counts); the file is
# the newest $OUT/NAME.cg.*.
measure() {
  h2load -n "$1" "${LOAD[@]}" "$URL" | grep -E 'requests:|status codes|TLS Protocol|Cipher' >&2
  callgrind_control -d "$LEG_PID" >/dev/null 2>&1
  sleep 1
  f=$(ls -t "$OUT/$NAME".cg.* | head -1)
}
callgrind_control -z "$LEG_PID" >/dev/null 2>&1
# Over TLS, each of h2load's 64 connections is handshaken inside the measured run (an RSA
# signature, ~19M instructions: at N=20000 two thirds of the total, where the rig's
# five-second round spreads them over many more requests). A first run of N/4 requests, on
# connections of its own, has the same handshakes: steady= is the difference's per request.
steady=""
if [[ $SCHEME == https ]]; then
  measure $((N / 4))
  small=$(total "$f")
fi
measure "$N"
tot=$(total "$f")
[[ $SCHEME == https ]] && steady=" steady=$(((tot - small) / (N - N / 4)))"
echo "$NAME file=$f total=$tot per_req=$((tot / N))$steady load=$(cut -d' ' -f1 /proc/loadavg)"
