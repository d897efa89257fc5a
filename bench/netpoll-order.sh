#!/usr/bin/env bash
# netpoll-order.sh — how much of Legate's HTTP/1.1 p99 is the Go runtime's order of ready goroutines.
#
# runtime.netpoll pushes each goroutine epoll reports ready onto the front of a list, so the
# scheduler runs a batch in the reverse of the kernel's order: the connection that waited longest
# in a batch runs last (nginx serves its events in the kernel's order). This script builds Legate
# twice from the working tree: with the installed toolchain, and with a throwaway copy of it whose
# runtime walks epoll's events last to first (one loop in runtime/netpoll_epoll.go, edited in the
# copy by sed: nothing of Go's source enters the repository), so that the batch comes out in the
# kernel's order. Then bench/ab.sh measures both against nginx (and HAProxy with HAPROXY=1) in
# interleaved rounds. The experiment is for understanding only; Legate ships on the stock runtime.
#
# Usage: bench/netpoll-order.sh   (from the repository's root)
# Knobs: ROUNDS=5 DURATION=4 HAPROXY= BASE_PORT=26800 NO_INSTALL=1 (passed to bench/ab.sh)
# Output: bench/ab.sh's, the last line one JSON object.
set -euo pipefail
export LC_ALL=C

BENCH=netpoll-order
. "$(dirname "$0")/lib.sh"
workdir
goroot=$(go env GOROOT)
src="$goroot/src/runtime/netpoll_epoll.go"
loop='for i := int32(0); i < n; i++ {'
grep -qF "$loop" "$src" || skip "this Go's runtime/netpoll_epoll.go has no loop '$loop' to reverse"

log "copying the toolchain ($goroot) to edit one loop of its runtime"
cp -a "$goroot" "$W/go"
sed -i "s/$loop/for i := n - 1; i >= 0; i-- {/" "$W/go/src/runtime/netpoll_epoll.go"
grep -qF 'for i := n - 1; i >= 0; i-- {' "$W/go/src/runtime/netpoll_epoll.go" || skip "the edit did not apply"

log "building Legate with the stock runtime and with the kernel-order one"
CGO_ENABLED=0 go build -o "$W/stock.b" ./cmd/legate
CGO_ENABLED=0 GOROOT="$W/go" PATH="$W/go/bin:$PATH" go build -o "$W/kernel-order.b" ./cmd/legate
# Measured copies: go build's own output sits in large page-cache folios.
cp "$W/stock.b" "$W/stock" && cp "$W/kernel-order.b" "$W/kernel-order"
"$(dirname "$0")/ab.sh" "$W/stock" "$W/kernel-order"
