#!/usr/bin/env bash
# ab.sh — interleaved A/B of Legate binaries against nginx (and HAProxy) on the rig's HTTP/1.1 shape.
#
# ../shared/bench/proxy-peers.sh measures each proxy in its own round, seconds apart; on a shared
# 2-core machine the background load moves between rounds, and nginx's own rate has read 41k to
# 61k req/s within one session. This script makes a change's few per cent visible anyway: every
# contestant is started once, pinned to PROXY_CPU, and all of them are measured in turn, ROUNDS
# times, so each round's ratios come from neighbouring seconds; it reports each contestant's
# median and the median of its per-round ratios to nginx (req/s and p99). A process that is not
# being measured is idle, so it takes nothing from the one that is.
#
# Shape: route / -> STATIC cluster of one nginx upstream (100-byte body, on LOAD_CPU), wrk -t1
# -c$CONNS for DURATION seconds on LOAD_CPU, keep-alive on both sides.
#
# Usage: bench/ab.sh BIN[:ENV=V,...] ...   e.g. bench/ab.sh /tmp/old /tmp/new /tmp/new:GOGC=50
#        (build each with `CGO_ENABLED=0 go build -o X.b ./cmd/legate && cp X.b X`: a binary run
#        straight from go build's output sits in large page-cache folios and reads more RSS)
# Knobs: ROUNDS=4 DURATION=4 CONNS=64 PROXY_CPU=0 LOAD_CPU=1 BASE_PORT=26800 (uses
#        BASE_PORT..+3+2×binaries) HAPROXY=1 (also measure HAProxy, if installed) NO_INSTALL=1
# Output: one line per contestant and round (req/s, p50, p99, load average, and how busy the
#        proxy's and the load's CPUs were: a load CPU near 100 % means wrk and the upstream, not
#        the proxy, set the pace of that round), one summary line per
#        contestant, then as the very last line one JSON object.
set -euo pipefail
export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"

BENCH=ab
. "$(dirname "$0")/lib.sh"
ROUNDS="${ROUNDS:-4}"
DURATION="${DURATION:-4}"
CONNS="${CONNS:-64}"
PROXY_CPU="${PROXY_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
B="${BASE_PORT:-26800}"
(($# > 0)) || { echo "usage: $0 BIN[:ENV=V,...] ..." >&2; exit 2; }

need_tools wrk:wrk nginx:nginx curl:curl taskset:util-linux
UP=$B NGX=$((B + 1)) HAP=$((B + 2))
ports_free "$UP" "$NGX" "$HAP"
workdir
upstream_conf "$UP"
nginx_proxy_conf "$NGX" "$UP"
start "$LOAD_CPU" nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
start "$PROXY_CPU" nginx -e "$W/nginx.err" -p "$W/" -c "$W/nginx.conf"
ready "$NGX" || skip "nginx did not answer"
names=(nginx) ports=("$NGX")

if [[ -n "${HAPROXY:-}" ]] && command -v haproxy >/dev/null; then
  cat >"$W/haproxy.cfg" <<E
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 5s
  timeout client 300s
  timeout server 300s
frontend listen
  bind 127.0.0.1:$HAP
  default_backend upstream
backend upstream
  server one 127.0.0.1:$UP
E
  start "$PROXY_CPU" haproxy -db -f "$W/haproxy.cfg"
  ready "$HAP" || skip "haproxy did not answer"
  names+=(haproxy) ports+=("$HAP")
fi

i=0
for spec in "$@"; do
  i=$((i + 1)) L=$((B + 2 + 2 * i)) A=$((B + 3 + 2 * i))
  bin=${spec%%:*} env=()
  [[ -x "$bin" ]] || { echo "not an executable: $bin" >&2; exit 2; }
  [[ $spec == *:* ]] && IFS=, read -r -a env <<<"${spec#*:}"
  ports_free "$L" "$A"
  legate_yaml "$A" "$L" "$UP"
  cp "$W/legate.yaml" "$W/legate$i.yaml"
  start "$PROXY_CPU" env ${env[@]+"${env[@]}"} "$bin" -c "$W/legate$i.yaml" --concurrency 1 --disable-hot-restart
  ready "$L" || skip "$spec did not answer"
  names+=("$spec") ports+=("$L")
done

# ticks CPU: that CPU's busy and total jiffies from /proc/stat (busy counts steal: time the
# hypervisor gave to another guest is time the contestant could not run).
ticks() { awk -v c="cpu$1" '$1 == c { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
# busy B0 T0 B1 T1: percentage busy between two ticks readings.
busy() { awk -v b="$3" -v a="$1" -v t="$4" -v s="$2" 'BEGIN { printf "%.0f", (t > s ? 100 * (b - a) / (t - s) : 0) }'; }

# us VALUE: wrk's latency (e.g. 812.00us, 2.31ms) in microseconds.
us() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) print v + 0; else if (v ~ /ms$/) print v * 1000; else print v * 1000000 }'; }

: >"$W/rounds"
for r in $(seq "$ROUNDS"); do
  for k in "${!names[@]}"; do
    read -r pb0 pt0 < <(ticks "$PROXY_CPU")
    read -r lb0 lt0 < <(ticks "$LOAD_CPU")
    timeout $((DURATION + 15)) taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 2s --latency \
      "http://127.0.0.1:${ports[$k]}/" >"$W/wrk" 2>&1 || true
    read -r pb1 pt1 < <(ticks "$PROXY_CPU")
    read -r lb1 lt1 < <(ticks "$LOAD_CPU")
    pbusy=$(busy "$pb0" "$pt0" "$pb1" "$pt1") lbusy=$(busy "$lb0" "$lt0" "$lb1" "$lt1")
    read -r rps p50 p99 < <(awk '/^Requests\/sec/{r=$2} /^ +50%/{a=$2} /^ +99%/{b=$2} END{print r+0, a, b}' "$W/wrk")
    line="$k $r $rps $(us "$p50") $(us "$p99") $(cut -d' ' -f1 /proc/loadavg) $pbusy $lbusy"
    echo "$line" >>"$W/rounds"
    printf '%-40s round %d  %9.0f req/s  p50 %7.0f us  p99 %7.0f us  load %s  busy proxy cpu %s%% load cpu %s%%\n' \
      "${names[$k]}" $r $rps "$(us "$p50")" "$(us "$p99")" "$(cut -d' ' -f1 /proc/loadavg)" "$pbusy" "$lbusy"
  done
done

# Per contestant: median req/s and p99, and the medians of the per-round ratios to nginx (index 0).
awk -v n="${#names[@]}" -v names="$(printf '%s\t' "${names[@]}")" '
  function median(a, m,   i, j, t) {
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  { rps[$1, $2] = $3; p99[$1, $2] = $5; pb[$1, $2] = $7; lb[$1, $2] = $8; if ($2 > rounds) rounds = $2 }
  END {
    split(names, nm, "\t"); printf "{\"bench\":\"ab\",\"rounds\":%d,\"contestants\":[", rounds
    for (k = 0; k < n; k++) {
      for (r = 1; r <= rounds; r++) { a[r] = rps[k, r]; b[r] = p99[k, r]; x[r] = rps[k, r] / rps[0, r]; y[r] = p99[k, r] / p99[0, r]; c[r] = pb[k, r]; d[r] = lb[k, r] }
      mr = median(a, rounds); mp = median(b, rounds); xr = median(x, rounds); yp = median(y, rounds); mc = median(c, rounds); md = median(d, rounds)
      lo = a[1]; hi = a[rounds]
      printf "%s{\"name\":\"%s\",\"rps_median\":%.0f,\"rps_min\":%.0f,\"rps_max\":%.0f,\"p99_us_median\":%.0f,\"x_nginx\":%.3f,\"p99_x_nginx\":%.3f,\"proxy_cpu_busy\":%d,\"load_cpu_busy\":%d}", (k ? "," : ""), nm[k + 1], mr, lo, hi, mp, xr, yp, mc, md
      printf "%-40s median %9.0f req/s (%.0f..%.0f)  p99 %7.0f us  x nginx %.3f  p99 x nginx %.3f  busy proxy/load cpu %d/%d%%\n", nm[k + 1], mr, lo, hi, mp, xr, yp, mc, md > "/dev/stderr"
    }
    print "]}"
  }' "$W/rounds"
