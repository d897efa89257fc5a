# lib.sh — what the bench/ scripts share; sourced, never run. The caller sets BENCH (its name,
# for log lines and the skip JSON) before sourcing, and `set -euo pipefail` itself.

BODY='0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz!'

log() { printf '[%s] %s\n' "$BENCH" "$*" >&2; }
# skip ends the run without failing: the reason on stderr and as the JSON last line.
skip() { log "SKIP: $*"; echo "{\"bench\":\"$BENCH\",\"skipped\":\"$*\"}"; exit 0; }

# need_tools TOOL:PACKAGE...: installs the missing ones with apt-get (unless NO_INSTALL), or skips.
need_tools() {
  local t need=() tools=()
  for t in "$@"; do
    tools+=("${t%%:*}")
    command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
  done
  if ((${#need[@]})) && [[ -z "${NO_INSTALL:-}" ]]; then
    local sudo=""; [[ "$(id -u)" == 0 ]] || sudo="sudo"
    log "installing: ${need[*]}"
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"; } >/dev/null 2>&1 ||
      skip "could not install ${need[*]}"
  fi
  for t in "${tools[@]}"; do command -v "$t" >/dev/null || skip "missing tool: $t"; done
}

# ports_free PORT...: skips when one of them already answers on 127.0.0.1.
ports_free() {
  local p
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then skip "127.0.0.1:$p is in use"; fi
  done
}

# workdir: makes $W and stops what start started when the script exits (only those PIDs).
STARTED=()
workdir() {
  W="$(mktemp -d "${TMPDIR:-/tmp}/$BENCH.XXXXXX")"
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}
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
# start CPU CMD...: runs CMD pinned to CPU, output to $W/out; sets PID.
start() {
  local cpu=$1; shift
  taskset -c "$cpu" "$@" >>"$W/out" 2>&1 &
  PID=$!; STARTED+=("$PID")
}

# ready PORT [SCHEME]: waits (READY_WAIT seconds at most, 15 unless set) until GET / on PORT
# (http, or https taking any certificate) answers BODY. bench/callgrind.sh sets 90: under
# valgrind Legate starts tens of times slower, and on a loaded machine took more than 15 s.
ready() {
  local deadline=$((SECONDS + ${READY_WAIT:-15}))
  while (( SECONDS < deadline )); do
    [[ "$(curl -k -s -m 1 "${2:-http}://127.0.0.1:$1/" 2>/dev/null)" == "$BODY" ]] && return 0
    sleep 0.1
  done
  tail -5 "$W/out" >&2; return 1
}

# upstream_conf PORT: the nginx upstream of the rig (one worker, keep-alive, BODY at /), in
# $W/upstream.conf; run it with `nginx -e $W/upstream.err -p $W/ -c $W/upstream.conf`.
upstream_conf() {
  cat >"$W/upstream.conf" <<E
user $(id -un) $(id -gn); worker_processes 1; daemon off; pid $W/upstream.pid; error_log $W/upstream.err error;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $W/cb; proxy_temp_path $W/px; fastcgi_temp_path $W/fc; uwsgi_temp_path $W/uw; scgi_temp_path $W/sc;
  keepalive_requests 1000000; keepalive_timeout 300s;
  server { listen 127.0.0.1:$1 backlog=4096; location / { default_type text/plain; return 200 "$BODY\n"; } } }
E
}

# nginx_proxy_conf LISTEN UPSTREAM [LISTEN_OPTS]: nginx as the proxy under test (one worker,
# HTTP/1.1 keep-alive to the upstream with 256 kept connections), in $W/nginx.conf; LISTEN_OPTS
# go on its listen line (e.g. "ssl; ssl_certificate ..."). Run it with
# `nginx -e $W/nginx.err -p $W/ -c $W/nginx.conf`.
nginx_proxy_conf() {
  cat >"$W/nginx.conf" <<E
user $(id -un) $(id -gn); worker_processes 1; daemon off; pid $W/nginx.pid; error_log $W/nginx.err error;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $W/cb; proxy_temp_path $W/px; fastcgi_temp_path $W/fc; uwsgi_temp_path $W/uw; scgi_temp_path $W/sc;
  keepalive_requests 1000000; keepalive_timeout 300s;
  upstream up { server 127.0.0.1:$2; keepalive 256; keepalive_requests 1000000; keepalive_timeout 300s; }
  server { listen 127.0.0.1:$1 backlog=4096 ${3:-};
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
E
}

# legate_yaml ADMIN LISTEN UPSTREAM [CERT KEY]: the rig's bootstrap (route / -> STATIC cluster
# of the upstream), in $W/legate.yaml; with CERT and KEY (PEM files) the listener terminates TLS.
legate_yaml() {
  cat >"$W/legate.yaml" <<E
admin: {address: {socket_address: {address: 127.0.0.1, port_value: $1}}}
static_resources:
  listeners:
  - name: listener_0
    address: {socket_address: {address: 127.0.0.1, port_value: $2}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          codec_type: AUTO
          route_config: {name: local_route, virtual_hosts: [{name: local_service, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: upstream}}]}]}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
$(if (($# > 3)); then cat <<T
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates: [{certificate_chain: {filename: $4}, private_key: {filename: $5}}]
T
fi)
  clusters:
  - name: upstream
    type: STATIC
    connect_timeout: 1s
    lb_policy: ROUND_ROBIN
    load_assignment: {cluster_name: upstream, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $3}}}}]}]}
E
}
