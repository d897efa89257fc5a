#!/usr/bin/env bash
# peers-h2-tls.sh — the HTTP/2, gRPC-shaped and TLS rounds of issue 22, Legate beside nginx.
#
# Rounds, each a pair of contestants (nginx, Legate) run back to back, ROUNDS times interleaved:
#   h2    h2c downstream (h2load -c16 -m10, prior knowledge) -> HTTP/1.1 keep-alive upstream
#   grpc  h2c downstream (h2load -c16 -m10) -> HTTP/2 cleartext upstream (nginx grpc_pass)
#   tls   HTTPS downstream, HTTP/1.1 keep-alive (wrk -t1 -c64) -> HTTP/1.1 upstream; both proxies
#         negotiate TLS 1.3 with TLS_AES_128_GCM_SHA256 (printed with the results)
# The proxies run on PROXY_CPU (default 0), one worker / --concurrency 1; the load generators and
# the nginx upstreams (100-byte body) on LOAD_CPU (default 1). Everything listens on 127.0.0.1.
#
# Usage: make bench-peers   or   PROJECT_BIN=bin/legate bench/peers-h2-tls.sh
# Knobs: ROUNDS=3 DURATION=5 PROXY_CPU=0 LOAD_CPU=1 BASE_PORT=26180 (uses BASE_PORT..+8)
#        NO_INSTALL=1 (never call apt-get; missing tools then skip the run, exit 0)
# Output: a table, then as the very last line one JSON object (`tail -n1 | jq .`).
set -euo pipefail
export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"

PROJECT_BIN="${PROJECT_BIN:-bin/legate}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
PROXY_CPU="${PROXY_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
B="${BASE_PORT:-26180}"
UP1=$B UP2=$((B + 1))                                # nginx upstreams: HTTP/1.1, h2c
declare -A PORT=([nginx.h2]=$((B + 2)) [nginx.grpc]=$((B + 3)) [nginx.tls]=$((B + 4))
                 [legate.h2]=$((B + 5)) [legate.grpc]=$((B + 6)) [legate.tls]=$((B + 7)))
ADMIN=$((B + 8))
BODY='0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz!'

log() { printf '[peers-h2-tls] %s\n' "$*" >&2; }
skip() { log "SKIP: $*"; echo "{\"bench\":\"peers-h2-tls\",\"skipped\":\"$*\"}"; exit 0; }

need=()
command -v nginx >/dev/null || need+=(nginx)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v wrk >/dev/null || need+=(wrk)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v taskset >/dev/null || need+=(util-linux)
if ((${#need[@]})) && [[ -z "${NO_INSTALL:-}" ]]; then
  SUDO=""; [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  log "installing: ${need[*]}"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"; } >/dev/null 2>&1 ||
    skip "could not install ${need[*]}"
fi
for t in nginx h2load wrk openssl curl taskset; do command -v "$t" >/dev/null || skip "missing tool: $t"; done
[[ -x "$PROJECT_BIN" ]] || skip "PROJECT_BIN=$PROJECT_BIN is not executable (make build)"
(( PROXY_CPU < $(nproc) && LOAD_CPU < $(nproc) )) || skip "needs CPUs $PROXY_CPU and $LOAD_CPU"
for p in $UP1 $UP2 "${PORT[@]}" $ADMIN; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then skip "127.0.0.1:$p is in use"; fi
done

W="$(mktemp -d "${TMPDIR:-/tmp}/peers-h2-tls.XXXXXX")"
STARTED=()   # only these PIDs are ever signalled
declare -A MAINPID=()
cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 30); do
    local alive=0
    for pid in "${STARTED[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start() {  # name cpu cmd...
  local name=$1 cpu=$2; shift 2
  taskset -c "$cpu" "$@" >"$W/$name.out" 2>&1 &
  STARTED+=("$!"); MAINPID[$name]=$!
}

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1 || skip "openssl could not make a certificate"

USER_LINE="user $(id -un) $(id -gn);"
TMPS="client_body_temp_path $W/cb; proxy_temp_path $W/px; fastcgi_temp_path $W/fc; uwsgi_temp_path $W/uw; scgi_temp_path $W/sc;"
cat >"$W/upstream.conf" <<E
$USER_LINE worker_processes 1; daemon off; pid $W/upstream.pid; error_log $W/upstream.err error;
events { worker_connections 4096; }
http { access_log off; $TMPS keepalive_requests 1000000; keepalive_timeout 300s; http2_max_concurrent_streams 1000;
  server { listen 127.0.0.1:$UP1 backlog=4096; location / { default_type text/plain; return 200 "$BODY\n"; } }
  server { listen 127.0.0.1:$UP2 http2 backlog=4096; location / { default_type text/plain; return 200 "$BODY\n"; } } }
E
cat >"$W/nginx.conf" <<E
$USER_LINE worker_processes 1; daemon off; pid $W/nginx.pid; error_log $W/nginx.err error;
events { worker_connections 4096; }
http { access_log off; $TMPS keepalive_requests 1000000; keepalive_timeout 300s; http2_max_concurrent_streams 1000;
  upstream h1 { server 127.0.0.1:$UP1; keepalive 256; keepalive_requests 1000000; keepalive_timeout 300s; }
  upstream h2 { server 127.0.0.1:$UP2; keepalive 256; keepalive_requests 1000000; keepalive_timeout 300s; }
  server { listen 127.0.0.1:${PORT[nginx.h2]} http2 backlog=4096;
    location / { proxy_pass http://h1; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  server { listen 127.0.0.1:${PORT[nginx.grpc]} http2 backlog=4096; location / { grpc_pass grpc://h2; } }
  server { listen 127.0.0.1:${PORT[nginx.tls]} ssl backlog=4096; ssl_certificate $W/cert.pem; ssl_certificate_key $W/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3; ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    location / { proxy_pass http://h1; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
E
hcm() {  # stat_prefix cluster
  cat <<E
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: $1
          codec_type: AUTO
          route_config: {virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: $2}}]}]}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
E
}
listener() {  # name port
  printf '  - name: %s\n    address: {socket_address: {address: 127.0.0.1, port_value: %s}}\n    filter_chains:\n    - filters:\n' "$1" "$2"
}
cluster() {  # name port
  printf '  - name: %s\n    type: STATIC\n    connect_timeout: 1s\n' "$1"
  printf '    circuit_breakers: {thresholds: [{max_connections: 100000, max_pending_requests: 100000, max_requests: 100000}]}\n'
  printf '    load_assignment: {cluster_name: %s, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %s}}}}]}]}\n' "$1" "$2"
}
{
  printf 'admin:\n  address: {socket_address: {address: 127.0.0.1, port_value: %s}}\nstatic_resources:\n  listeners:\n' "$ADMIN"
  listener h2 "${PORT[legate.h2]}"; hcm h2 h1
  listener grpc "${PORT[legate.grpc]}"; hcm grpc h2
  listener tls "${PORT[legate.tls]}"; hcm tls h1
  cat <<E
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates: [{certificate_chain: {filename: $W/cert.pem}, private_key: {filename: $W/key.pem}}]
  clusters:
E
  cluster h1 "$UP1"
  cluster h2 "$UP2"
  cat <<E
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
E
} >"$W/legate.yaml"

start upstream "$LOAD_CPU" nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
start nginx "$PROXY_CPU" nginx -e "$W/nginx.err" -p "$W/" -c "$W/nginx.conf"
start legate "$PROXY_CPU" "$PROJECT_BIN" -c "$W/legate.yaml" --concurrency 1 --disable-hot-restart

ready() {  # scenario contestant: one request answered with the body, within 15 s
  local url opts=(-s -m 1) deadline=$((SECONDS + 15))
  case $1 in
    tls) url="https://127.0.0.1:${PORT[$2.$1]}/"; opts+=(-k) ;;
    *)   url="http://127.0.0.1:${PORT[$2.$1]}/"; opts+=(--http2-prior-knowledge) ;;
  esac
  while (( SECONDS < deadline )); do
    [[ "$(curl "${opts[@]}" "$url" 2>/dev/null)" == "$BODY" ]] && return 0
    sleep 0.1
  done
  log "$2 does not answer the $1 round on :${PORT[$2.$1]}; log tail:"; tail -5 "$W/$2.out" >&2
  return 1
}
SCENARIOS=()
for s in h2 grpc tls; do
  if ready "$s" nginx && ready "$s" legate; then SCENARIOS+=("$s"); else log "leaving out the $s round"; fi
done
((${#SCENARIOS[@]})) || skip "no round could start"
# The tls round compares like with like: Go's server picks TLS 1.3 with TLS_AES_128_GCM_SHA256 on
# AES hardware, while nginx 1.22 stops at TLS 1.2 by default and follows the client's order
# (AES-256 first), so nginx is given TLS 1.3 and the same suite above. What each one actually
# negotiated with an OpenSSL client (as wrk is) is printed with the results.
suite() {  # contestant -> "version suite" of a TLS handshake with it
  openssl s_client -connect "127.0.0.1:${PORT[$1.tls]}" </dev/null 2>/dev/null |
    awk '/^New, / {sub(/,$/, "", $2); print $2, $NF; exit}'
}
declare -A SUITE=([nginx]="$(suite nginx)" [legate]="$(suite legate)")
[[ "${SUITE[nginx]}" == "${SUITE[legate]}" ]] || log "the tls round is not like with like: nginx ${SUITE[nginx]:-?}, Legate ${SUITE[legate]:-?}"

rps() {  # scenario contestant -> req/s of one round
  local port=${PORT[$2.$1]}
  case $1 in
    tls) taskset -c "$LOAD_CPU" wrk -t1 -c64 -d"${DURATION}s" --timeout 2s "https://127.0.0.1:$port/" 2>&1 |
           awk '/^Requests\/sec:/ {print $2} /Non-2xx|Socket errors/ {bad = 1} END {if (bad) print "errors" > "/dev/stderr"}' ;;
    *)   taskset -c "$LOAD_CPU" h2load -c16 -m10 -D "$DURATION" --warm-up-time=1 "http://127.0.0.1:$port/" 2>&1 |
           grep -oE 'finished in [0-9.]+s, [0-9.]+ req/s' | awk '{print $4}' ;;
  esac
}
RES="$W/results"; : >"$RES"
for r in $(seq 1 "$ROUNDS"); do
  for s in "${SCENARIOS[@]}"; do
    for c in nginx legate; do
      v=$(rps "$s" "$c"); v=${v:-0}
      echo "$s $c $r $v $(cut -d' ' -f1 /proc/loadavg)" >>"$RES"
      log "round $r $s $c: $v req/s (load average $(cut -d' ' -f1 /proc/loadavg))"
    done
  done
done
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
rss_nginx=$(( $(hwm "${MAINPID[nginx]}") + $(for p in $(pgrep -P "${MAINPID[nginx]}"); do hwm "$p"; done | awk '{s += $1} END {print s + 0}') ))
rss_legate=$(hwm "${MAINPID[legate]}")

echo
echo "peers-h2-tls: ${ROUNDS} interleaved rounds of ${DURATION}s; proxies on CPU $PROXY_CPU, load and upstreams on CPU $LOAD_CPU"
awk -v rn="$rss_nginx" -v rl="$rss_legate" -v order="${SCENARIOS[*]}" -v sn="${SUITE[nginx]}" -v sl="${SUITE[legate]}" '
  function med(a, k,   i, j, t) {
    for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  { k = ++n[$1, $2]; v[$1, $2, k] = $4; if ($5 > maxload) maxload = $5 }
  END {
    printf "%-6s %12s %12s %12s %12s %9s\n", "round", "nginx_med", "legate_med", "legate_min", "legate_max", "x_nginx"
    json = sprintf("{\"bench\":\"peers-h2-tls\",\"max_load_avg\":%.2f,\"rss_kb\":{\"nginx\":%d,\"legate\":%d},\"results\":[", maxload, rn, rl)
    ns = split(order, sc, " ")
    for (i = 1; i <= ns; i++) {
      s = sc[i]; k = n[s, "legate"]; mn = 1e18; mx = 0
      for (j = 1; j <= k; j++) { a[j] = v[s, "legate", j] + 0; if (a[j] < mn) mn = a[j]; if (a[j] > mx) mx = a[j] }
      ml = med(a, k)
      for (j = 1; j <= n[s, "nginx"]; j++) a[j] = v[s, "nginx", j] + 0
      mg = med(a, n[s, "nginx"])
      x = mg > 0 ? ml / mg : 0
      printf "%-6s %12.0f %12.0f %12.0f %12.0f %9.3f\n", s, mg, ml, mn, mx, x
      json = json sprintf("%s{\"round\":\"%s\",\"nginx_rps_med\":%.0f,\"legate_rps_med\":%.0f,\"legate_rps_min\":%.0f,\"legate_rps_max\":%.0f,\"x_nginx\":%.4f}", (i > 1 ? "," : ""), s, mg, ml, mn, mx, x)
    }
    printf "peak RSS: nginx %.1f MB (master + worker), legate %.1f MB; highest 1-minute load average seen: %.2f\n", rn / 1024, rl / 1024, maxload
    printf "tls round negotiated: nginx %s, legate %s\n", sn, sl
    print json sprintf("],\"tls_negotiated\":{\"nginx\":\"%s\",\"legate\":\"%s\"}}", sn, sl)
  }' "$RES"
