#!/usr/bin/env bash
# syscalls.sh — system calls per proxied request, Legate and nginx, counted the same way.
#
# Unlike req/s, the count per request hardly moves with the machine's background load, so it
# is the number to compare on a shared box. Shape of ../shared/bench/proxy-peers.sh: HTTP/1.1
# keep-alive, listener 127.0.0.1, route / -> STATIC cluster of one nginx upstream (100-byte
# body); each proxy pinned to PROXY_CPU, wrk -t1 -c$CONNS and the upstream on LOAD_CPU. The
# proxy's process is counted with `perf stat` on the syscall tracepoints (failed reads are the
# read exits with -EAGAIN) while wrk runs DURATION seconds.
#
# Usage: make build && PROJECT_BIN=bin/legate bench/syscalls.sh
# Knobs: DURATION=5 CONNS=64 PROXY_CPU=0 LOAD_CPU=1 BASE_PORT=26190 (uses BASE_PORT..+3)
#        NO_INSTALL=1 (never call apt-get; missing tools then skip, exit 0)
# Output: one line per proxy and system call, then as the very last line one JSON object.
set -euo pipefail
export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"

PROJECT_BIN="${PROJECT_BIN:-bin/legate}"
DURATION="${DURATION:-5}"
CONNS="${CONNS:-64}"
PROXY_CPU="${PROXY_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
B="${BASE_PORT:-26190}"
UP=$B NGX=$((B + 1)) LEG=$((B + 2)) ADMIN=$((B + 3))
BODY='0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz!'
CALLS=(read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait epoll_ctl futex nanosleep sched_yield getsockopt)

log() { printf '[syscalls] %s\n' "$*" >&2; }
skip() { log "SKIP: $*"; echo "{\"bench\":\"syscalls\",\"skipped\":\"$*\"}"; exit 0; }

need=()
command -v nginx >/dev/null || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
command -v perf >/dev/null || need+=(linux-perf)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})) && [[ -z "${NO_INSTALL:-}" ]]; then
  SUDO=""; [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  log "installing: ${need[*]}"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"; } >/dev/null 2>&1 ||
    skip "could not install ${need[*]}"
fi
for t in nginx wrk perf curl taskset; do command -v "$t" >/dev/null || skip "missing tool: $t"; done
[[ -x "$PROJECT_BIN" ]] || skip "PROJECT_BIN=$PROJECT_BIN is not executable (make build)"
perf stat -e syscalls:sys_enter_read -- true >/dev/null 2>&1 || skip "perf cannot read the syscall tracepoints here (perf_event_paranoid, tracefs)"
for p in $UP $NGX $LEG $ADMIN; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then skip "127.0.0.1:$p is in use"; fi
done

W="$(mktemp -d "${TMPDIR:-/tmp}/syscalls.XXXXXX")"
STARTED=()   # only these PIDs are ever signalled
cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start() {  # cpu cmd... ; sets PID
  local cpu=$1; shift
  taskset -c "$cpu" "$@" >>"$W/out" 2>&1 &
  PID=$!; STARTED+=("$PID")
}

TMPS="client_body_temp_path $W/cb; proxy_temp_path $W/px; fastcgi_temp_path $W/fc; uwsgi_temp_path $W/uw; scgi_temp_path $W/sc;"
cat >"$W/nginx.conf" <<E
user $(id -un) $(id -gn); worker_processes 1; daemon off; pid $W/nginx.pid; error_log $W/nginx.err error;
events { worker_connections 4096; }
http { access_log off; $TMPS keepalive_requests 1000000; keepalive_timeout 300s;
  upstream up { server 127.0.0.1:$UP; keepalive 256; keepalive_requests 1000000; keepalive_timeout 300s; }
  server { listen 127.0.0.1:$NGX backlog=4096;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
E
sed -e "s|$W/nginx|$W/upstream|g" -e '/upstream up/d' \
    -e "s|listen 127.0.0.1:$NGX backlog=4096;|listen 127.0.0.1:$UP backlog=4096;|" \
    -e "s|location / { proxy_pass[^}]*}|location / { default_type text/plain; return 200 \"$BODY\\\\n\"; }|" \
    "$W/nginx.conf" >"$W/upstream.conf"
cat >"$W/legate.yaml" <<E
admin: {address: {socket_address: {address: 127.0.0.1, port_value: $ADMIN}}}
static_resources:
  listeners:
  - name: listener_0
    address: {socket_address: {address: 127.0.0.1, port_value: $LEG}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          codec_type: AUTO
          route_config: {name: local_route, virtual_hosts: [{name: local_service, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: upstream}}]}]}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
  clusters:
  - name: upstream
    type: STATIC
    connect_timeout: 1s
    lb_policy: ROUND_ROBIN
    load_assignment: {cluster_name: upstream, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $UP}}}}]}]}
E

start "$LOAD_CPU" nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
start "$PROXY_CPU" nginx -e "$W/nginx.err" -p "$W/" -c "$W/nginx.conf"; NGX_MASTER=$PID
start "$PROXY_CPU" "$PROJECT_BIN" -c "$W/legate.yaml" --concurrency 1 --disable-hot-restart; LEG_PID=$PID
ready() {
  local deadline=$((SECONDS + 15))
  while (( SECONDS < deadline )); do
    [[ "$(curl -s -m 1 "http://127.0.0.1:$1/" 2>/dev/null)" == "$BODY" ]] && return 0
    sleep 0.1
  done
  tail -5 "$W/out" >&2; return 1
}
ready "$NGX" || skip "nginx did not start"
ready "$LEG" || skip "Legate did not start"
NGX_WORKER=$(pgrep -P "$NGX_MASTER" | head -1)

count() {  # name pid port -> lines "name call per_request"
  local ev="" c reqs
  for c in "${CALLS[@]}"; do ev+="syscalls:sys_enter_$c,"; done
  ev+="raw_syscalls:sys_enter"
  perf stat -x, -e "$ev" -e syscalls:sys_exit_read --filter 'ret == -11' -p "$2" -o "$W/perf.$1" &
  local pp=$!
  sleep 0.5
  taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$3/" >"$W/wrk.$1"
  kill -INT "$pp"; wait "$pp" || true
  reqs=$(awk '/requests in/ {print $1}' "$W/wrk.$1")
  awk -F, -v n="${reqs:-0}" -v who="$1" '$1 ~ /^[0-9]+$/ && n > 0 {
      name = $3
      if (name ~ /sys_exit_read/) name = "read_eagain"
      else if (name ~ /raw_syscalls/) name = "all"
      else sub(/.*sys_enter_/, "", name)
      if ($1 > 0 || name == "all") printf "%s %s %.3f\n", who, name, $1 / n
    }' "$W/perf.$1"
  echo "$1 requests $reqs"
}
{ count legate "$LEG_PID" "$LEG"; count nginx "$NGX_WORKER" "$NGX"; } >"$W/res"
LOAD=$(cut -d' ' -f1 /proc/loadavg)
echo "syscalls per request, wrk -t1 -c$CONNS -d${DURATION}s, HTTP/1.1 keep-alive (load average $LOAD):"
awk '$2 != "requests" {printf "  %-7s %-12s %7s\n", $1, $2, $3}' "$W/res"
awk -v load="$LOAD" '
  $2 == "requests" { req[$1] = $3; next }
  { v[$1] = v[$1] (v[$1] == "" ? "" : ",") sprintf("\"%s\":%s", $2, $3) }
  END { printf "{\"bench\":\"syscalls\",\"load_avg\":%s,\"legate\":{\"requests\":%d,%s},\"nginx\":{\"requests\":%d,%s}}\n", load, req["legate"], v["legate"], req["nginx"], v["nginx"] }' "$W/res"
