#!/usr/bin/env bash
# syscalls.sh — system calls per proxied request, Legate and nginx, counted the same way.
#
# Unlike req/s, the count per request hardly moves with the machine's background load, so it
# is the number to compare on a shared box. Shape of ../shared/bench/proxy-peers.sh: HTTP/1.1
# keep-alive, listener 127.0.0.1, route / -> STATIC cluster of one nginx upstream (100-byte
# body); each proxy pinned to PROXY_CPU, wrk -t1 -c$CONNS and the upstream on LOAD_CPU. The
# proxy's process is counted with `perf stat` on the syscall tracepoints (failed reads are the
# read and recvfrom exits with -EAGAIN) while wrk runs DURATION seconds; its user and system CPU time per
# request come from /proc/PID/stat over the same run (the machine has no hardware counters, so
# this split is what says how much of a request is the kernel's and how much the proxy's own).
#
# With TLS=1 both proxies terminate HTTPS downstream (the tls round of bench/peers-h2-tls.sh:
# TLS 1.3, TLS_AES_128_GCM_SHA256 on both, a self-signed RSA 2048 certificate) and wrk speaks
# HTTPS; the upstream stays plain HTTP/1.1.
#
# Usage: make build && PROJECT_BIN=bin/legate bench/syscalls.sh
# Knobs: DURATION=5 CONNS=64 PROXY_CPU=0 LOAD_CPU=1 BASE_PORT=26190 (uses BASE_PORT..+3) TLS=
#        NO_INSTALL=1 (never call apt-get; missing tools then skip, exit 0)
# Output: one line per proxy and system call, then as the very last line one JSON object.
set -euo pipefail
export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"

BENCH=syscalls
. "$(dirname "$0")/lib.sh"
PROJECT_BIN="${PROJECT_BIN:-bin/legate}"
DURATION="${DURATION:-5}"
CONNS="${CONNS:-64}"
PROXY_CPU="${PROXY_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
B="${BASE_PORT:-26190}"
UP=$B NGX=$((B + 1)) LEG=$((B + 2)) ADMIN=$((B + 3))
CALLS=(read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait epoll_ctl futex nanosleep sched_yield getsockopt)

need_tools nginx:nginx wrk:wrk perf:linux-perf curl:curl taskset:util-linux openssl:openssl
[[ -x "$PROJECT_BIN" ]] || skip "PROJECT_BIN=$PROJECT_BIN is not executable (make build)"
perf stat -e syscalls:sys_enter_read -- true >/dev/null 2>&1 || skip "perf cannot read the syscall tracepoints here (perf_event_paranoid, tracefs)"
ports_free $UP $NGX $LEG $ADMIN
workdir
upstream_conf "$UP"
legate_yaml "$ADMIN" "$LEG" "$UP"
SCHEME=http NGX_SSL=""
if [[ -n "${TLS:-}" ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1 || skip "openssl could not make a certificate"
  SCHEME=https
  NGX_SSL="ssl; ssl_certificate $W/cert.pem; ssl_certificate_key $W/key.pem; ssl_protocols TLSv1.2 TLSv1.3; ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256"
  # The listener's transport socket goes after its filters (the line of the router).
  awk -v w="$W" '{print} /envoy.filters.http.router/ {
      print "      transport_socket:"
      print "        name: envoy.transport_sockets.tls"
      print "        typed_config:"
      print "          \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
      print "          common_tls_context:"
      print "            tls_certificates: [{certificate_chain: {filename: " w "/cert.pem}, private_key: {filename: " w "/key.pem}}]"
    }' "$W/legate.yaml" >"$W/legate.tls.yaml" && mv "$W/legate.tls.yaml" "$W/legate.yaml"
fi

nginx_proxy_conf "$NGX" "$UP" "$NGX_SSL"

start "$LOAD_CPU" nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
start "$PROXY_CPU" nginx -e "$W/nginx.err" -p "$W/" -c "$W/nginx.conf"; NGX_MASTER=$PID
start "$PROXY_CPU" "$PROJECT_BIN" -c "$W/legate.yaml" --concurrency 1 --disable-hot-restart; LEG_PID=$PID
if [[ $SCHEME == https ]]; then
  ready() {  # PORT: as lib.sh's, over HTTPS
    local deadline=$((SECONDS + 15))
    while (( SECONDS < deadline )); do
      [[ "$(curl -sk -m 1 "https://127.0.0.1:$1/" 2>/dev/null)" == "$BODY" ]] && return 0
      sleep 0.1
    done
    tail -5 "$W/out" >&2; return 1
  }
fi
ready "$NGX" || skip "nginx did not start"
ready "$LEG" || skip "Legate did not start"
NGX_WORKER=$(pgrep -P "$NGX_MASTER" | head -1)

cpu_ticks() {  # pid -> "utime stime" in clock ticks, its threads included (/proc/PID/stat)
  sed 's/.*) //' "/proc/$1/stat" | awk '{print $12, $13}'
}

count() {  # name pid port -> lines "name call per_request", then its user and system CPU per request
  local ev="" c reqs
  for c in "${CALLS[@]}"; do ev+="syscalls:sys_enter_$c,"; done
  ev+="raw_syscalls:sys_enter"
  perf stat -x, -e "$ev" -e syscalls:sys_exit_read --filter 'ret == -11' \
    -e syscalls:sys_exit_recvfrom --filter 'ret == -11' -p "$2" -o "$W/perf.$1" &
  local pp=$!
  sleep 0.5
  local before after
  before=$(cpu_ticks "$2")
  taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$SCHEME://127.0.0.1:$3/" >"$W/wrk.$1"
  after=$(cpu_ticks "$2")
  kill -INT "$pp"; wait "$pp" || true
  reqs=$(awk '/requests in/ {print $1}' "$W/wrk.$1")
  # CPU time per request in microseconds, user and system, from the process's tick counts.
  awk -v b="$before" -v a="$after" -v n="${reqs:-0}" -v hz="$(getconf CLK_TCK)" -v who="$1" 'BEGIN {
      split(b, x, " "); split(a, y, " ")
      if (n > 0) printf "%s user_us %.2f\n%s sys_us %.2f\n", who, (y[1] - x[1]) * 1e6 / hz / n, who, (y[2] - x[2]) * 1e6 / hz / n
    }'
  awk -F, -v n="${reqs:-0}" -v who="$1" '$1 ~ /^[0-9]+$/ && n > 0 {
      name = $3
      if (name ~ /sys_exit_read/) name = "read_eagain"
      else if (name ~ /sys_exit_recvfrom/) name = "recvfrom_eagain"
      else if (name ~ /raw_syscalls/) name = "all"
      else sub(/.*sys_enter_/, "", name)
      if ($1 > 0 || name == "all") printf "%s %s %.3f\n", who, name, $1 / n
    }' "$W/perf.$1"
  echo "$1 requests $reqs"
}
{ count legate "$LEG_PID" "$LEG"; count nginx "$NGX_WORKER" "$NGX"; } >"$W/res"
LOAD=$(cut -d' ' -f1 /proc/loadavg)
echo "syscalls per request, wrk -t1 -c$CONNS -d${DURATION}s, HTTP/1.1 keep-alive${TLS:+ over TLS} (load average $LOAD):"
awk '$2 != "requests" {printf "  %-7s %-12s %7s\n", $1, $2, $3}' "$W/res"
awk -v load="$LOAD" -v scheme="$SCHEME" '
  $2 == "requests" { req[$1] = $3; next }
  { v[$1] = v[$1] (v[$1] == "" ? "" : ",") sprintf("\"%s\":%s", $2, $3) }
  END { printf "{\"bench\":\"syscalls\",\"scheme\":\"%s\",\"load_avg\":%s,\"legate\":{\"requests\":%d,%s},\"nginx\":{\"requests\":%d,%s}}\n", scheme, load, req["legate"], v["legate"], req["nginx"], v["nginx"] }' "$W/res"
