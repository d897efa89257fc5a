#!/usr/bin/env bash
# cpuprofile.sh — where a proxied request's CPU goes, Legate beside nginx, kernel included.
#
# The rig's shape (../shared/bench/proxy-peers.sh): HTTP/1.1 keep-alive, listener 127.0.0.1,
# route / -> one nginx upstream (100-byte body); each proxy pinned to PROXY_CPU, wrk -t1 -c$CONNS
# and the upstream on LOAD_CPU. Each proxy's process is sampled with `perf record -e cpu-clock`
# (a software clock: this machine has no hardware counters) while wrk runs DURATION seconds.
# Printed per proxy: req/s, CPU microseconds per request (samples / frequency / requests), the
# split by kernel, binary, libc and vDSO, and the TOP symbols; then the kernel symbols whose
# time per request differs most between the two.
#
# Usage: make build && PROJECT_BIN=bin/legate bench/cpuprofile.sh
# Knobs: DURATION=5 CONNS=64 TOP=30 FREQ=2999 PROXY_CPU=0 LOAD_CPU=1 BASE_PORT=26390
#        NO_INSTALL=1 (never call apt-get; missing tools then skip, exit 0)
set -euo pipefail
export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"

BENCH=cpuprofile
. "$(dirname "$0")/lib.sh"
PROJECT_BIN="${PROJECT_BIN:-bin/legate}"
DURATION="${DURATION:-5}"
CONNS="${CONNS:-64}"
TOP="${TOP:-30}"
FREQ="${FREQ:-2999}"
PROXY_CPU="${PROXY_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
B="${BASE_PORT:-26390}"
UP=$B NGX=$((B + 1)) LEG=$((B + 2)) ADMIN=$((B + 3))

need_tools nginx:nginx wrk:wrk perf:linux-perf curl:curl taskset:util-linux python3:python3
[[ -x "$PROJECT_BIN" ]] || skip "PROJECT_BIN=$PROJECT_BIN is not executable (make build)"
perf record -q -e cpu-clock -o /dev/null -- true >/dev/null 2>&1 || skip "perf cannot sample cpu-clock here (perf_event_paranoid)"
ports_free $UP $NGX $LEG $ADMIN
workdir
upstream_conf "$UP"
legate_yaml "$ADMIN" "$LEG" "$UP"
nginx_proxy_conf "$NGX" "$UP"
start "$LOAD_CPU" nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
start "$PROXY_CPU" nginx -e "$W/nginx.err" -p "$W/" -c "$W/nginx.conf"; NGX_MASTER=$PID
start "$PROXY_CPU" "$PROJECT_BIN" -c "$W/legate.yaml" --concurrency 1 --disable-hot-restart; LEG_PID=$PID
ready "$NGX" || skip "nginx did not start"
ready "$LEG" || skip "Legate did not start"
NGX_WORKER=$(pgrep -P "$NGX_MASTER" | head -1)

profile() {  # name pid port
  perf record -q -e cpu-clock -F "$FREQ" -p "$2" -o "$W/perf.$1" -- sleep $((DURATION + 1)) >/dev/null 2>&1 &
  local pp=$! n reqs us
  sleep 0.3
  taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$3/" >"$W/wrk.$1"
  wait "$pp" || true
  n=$(perf script -i "$W/perf.$1" -F period 2>/dev/null | wc -l)
  reqs=$(awk '/requests in/ {print $1}' "$W/wrk.$1")
  us=$(awk -v n="$n" -v r="$reqs" -v f="$FREQ" 'BEGIN {printf "%.2f", n / f * 1e6 / r}')
  echo "== $1: $(awk '/Requests\/sec/ {print $2}' "$W/wrk.$1") req/s; $n samples at $FREQ Hz = $us us of CPU per request"
  perf report -i "$W/perf.$1" --no-children --sort dso -q 2>/dev/null | sed -n '1,6p'
  perf report -i "$W/perf.$1" --no-children --sort sym -q 2>/dev/null >"$W/sym.$1"
  sed -n "1,${TOP}p" "$W/sym.$1"
  awk -v us="$us" '{p = $1; sub("%", "", p); $1 = ""; printf "%.4f\t%s\n", p * us / 100, $0}' "$W/sym.$1" >"$W/us.$1"
}
profile legate "$LEG_PID" "$LEG"
profile nginx "$NGX_WORKER" "$NGX"

python3 - "$W/us.legate" "$W/us.nginx" <<'P'
import collections, sys
def load(path):
    d = collections.Counter()
    for line in open(path):
        us, sym = line.rstrip("\n").split("\t", 1)
        d[sym.strip()] += float(us)
    return d
leg, ngx = load(sys.argv[1]), load(sys.argv[2])
kern = lambda d: sum(v for k, v in d.items() if k.startswith("[k]"))
print("kernel us per request: legate %.2f, nginx %.2f" % (kern(leg), kern(ngx)))
diff = {k: leg.get(k, 0) - ngx.get(k, 0) for k in set(leg) | set(ngx) if k.startswith("[k]")}
print("kernel symbols by difference (us per request, legate - nginx):")
for k, v in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:12]:
    print("  %+.3f  legate %.3f  nginx %.3f  %s" % (v, leg.get(k, 0), ngx.get(k, 0), k))
P
