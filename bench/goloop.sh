#!/usr/bin/env bash
# goloop.sh — what the Go runtime's way of waiting costs a proxy, apart from Legate's own work.
#
# bench/goloop is the least an HTTP/1.1 keep-alive proxy in Go can do per request on the rig's
# shape (no parsing beyond framing, no routing, no stats), built two ways: a goroutine per
# connection waiting in the runtime's netpoller as Legate does (GOLOOP=goroutine), and one
# goroutine serving every socket from an epoll instance it waits for in the netpoller
# (GOLOOP=epoll: one wake-up per batch, the kernel's order, no goroutine switch per request).
# This script builds it and measures both beside Legate and nginx with bench/ab.sh (req/s, p99),
# or with CALLGRIND=1 counts user-space instructions per request with bench/callgrind.sh. The
# difference between the two builds is the price of goroutine-per-connection; the difference
# between the goroutine build and Legate is Legate's own work.
#
# Usage: bench/goloop.sh [LEGATE_BIN...]   (from the repository's root; default: Legate built from
#        the working tree)
# Knobs: CALLGRIND=1, and those of bench/ab.sh (ROUNDS, DURATION, BASE_PORT, HAPROXY, NO_INSTALL)
#        or bench/callgrind.sh (N, BASE_PORT, OUT)
# Output: bench/ab.sh's (the last line one JSON object), or one callgrind line per build.
set -euo pipefail
export LC_ALL=C

BENCH=goloop
. "$(dirname "$0")/lib.sh"
workdir
here=$(cd "$(dirname "$0")" && pwd)
log "building bench/goloop and Legate"
(cd "$here/goloop" && CGO_ENABLED=0 go build -o "$W/goloop.b" .)
cp "$W/goloop.b" "$W/goroutine" && cp "$W/goloop.b" "$W/epoll"
bins=("$@")
if ((${#bins[@]} == 0)); then
  CGO_ENABLED=0 go build -o "$W/legate.b" ./cmd/legate && cp "$W/legate.b" "$W/legate"
  bins=("$W/legate")
fi
if [[ -n "${CALLGRIND:-}" ]]; then
  export PROTO=h1
  GOLOOP=goroutine "$here/callgrind.sh" "$W/goroutine" goloop-goroutine | tail -1
  GOLOOP=epoll "$here/callgrind.sh" "$W/epoll" goloop-epoll | tail -1
  for b in "${bins[@]}"; do "$here/callgrind.sh" "$b" "$(basename "$b")" | tail -1; done
else
  "$here/ab.sh" "$W/goroutine:GOLOOP=goroutine" "$W/epoll:GOLOOP=epoll" "${bins[@]}"
fi
