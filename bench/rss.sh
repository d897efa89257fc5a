#!/usr/bin/env bash
# rss.sh — where Legate's resident memory is, on the rig's bootstrap (../shared/bench/proxy-peers.sh
# measures peak VmHWM during its HTTP/1 rounds; this says what that peak is made of).
#
# Legate runs the rig's shape (listener 127.0.0.1, route / -> STATIC cluster of one nginx
# upstream with a 100-byte body, --concurrency 1, pinned to PROXY_CPU). Its memory is read from
# /proc/PID/smaps and pagemap at three points: once ready (after init and the configuration),
# after wrk -t1 -c$CONNS for DURATION seconds, and with IDLE keep-alive connections open
# (each sent one request, then left idle). Each report splits the resident set into the
# binary's pages per ELF section (file-backed: text, rodata, pclntab; the kernel maps them 64 KiB
# around each touched page, fault-around), other files (libc when cgo is linked) and anonymous
# memory (the Go heap, stacks, runtime metadata). Unlike req/s, these figures barely move with
# the machine's load.
#
# Usage: make build && PROJECT_BIN=bin/legate bench/rss.sh
# Knobs: DURATION=5 CONNS=64 IDLE=10000 PROXY_CPU=0 LOAD_CPU=1 BASE_PORT=26290 (uses BASE_PORT..+2)
#        NO_INSTALL=1 (never call apt-get; missing tools then skip, exit 0)
# Output: the three reports, then as the very last line one JSON object (kB).
set -euo pipefail
export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"

BENCH=rss
. "$(dirname "$0")/lib.sh"
PROJECT_BIN="${PROJECT_BIN:-bin/legate}"
DURATION="${DURATION:-5}"
CONNS="${CONNS:-64}"
IDLE="${IDLE:-10000}"
PROXY_CPU="${PROXY_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"
B="${BASE_PORT:-26290}"
UP=$B LEG=$((B + 1)) ADMIN=$((B + 2))

need_tools nginx:nginx wrk:wrk curl:curl taskset:util-linux python3:python3 readelf:binutils
[[ -x "$PROJECT_BIN" ]] || skip "PROJECT_BIN=$PROJECT_BIN is not executable (make build)"
ulimit -n $((IDLE + 1024)) 2>/dev/null || skip "cannot raise the open-file limit to $((IDLE + 1024)) (IDLE=$IDLE)"
ports_free $UP $LEG $ADMIN
workdir
upstream_conf "$UP"
legate_yaml "$ADMIN" "$LEG" "$UP"

# report.py PID BINARY LABEL: the resident set by kind, and the binary's by ELF section.
cat >"$W/report.py" <<'E'
import re, struct, subprocess, sys
pid, binary, label = sys.argv[1], sys.argv[2], sys.argv[3]
PAGE = 4096
secs = []
for line in subprocess.run(['readelf', '-S', '-W', binary], capture_output=True, text=True).stdout.splitlines():
    m = re.match(r'\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)', line)
    if m and int(m[2], 16):
        secs.append((int(m[2], 16), int(m[2], 16) + int(m[3], 16), m[1]))
kinds = {'binary': 0, 'other files': 0, 'anonymous': 0}
maps, cur = [], None
for line in open(f'/proc/{pid}/smaps'):
    m = re.match(r'^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$', line)
    if m:
        cur = [int(m[1], 16), int(m[2], 16), m[3].strip(), 0]
        maps.append(cur)
    elif line.startswith('Rss:'):
        cur[3] = int(line.split()[1])
real = __import__('os').path.realpath(binary)
for lo, hi, path, rss in maps:
    kinds['binary' if path == real else 'other files' if path.startswith('/') else 'anonymous'] += rss
# the binary's resident pages per section (its .bss is anonymous and counted there too)
bysec = {}
with open(f'/proc/{pid}/pagemap', 'rb') as f:
    for lo, hi, name in secs:
        a, b = lo // PAGE, (hi + PAGE - 1) // PAGE
        f.seek(a * 8)
        data = f.read((b - a) * 8)
        n = sum(1 for i in range(b - a) if struct.unpack_from('<Q', data, i * 8)[0] >> 63)
        if n:
            bysec[name] = bysec.get(name, 0) + n * 4
status = {l.split(':')[0]: int(l.split()[1]) for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
print(f'{label}: VmRSS {status["VmRSS"]} kB, VmHWM {status["VmHWM"]} kB; ' + ', '.join(f'{k} {v} kB' for k, v in kinds.items()))
top = sorted(bysec.items(), key=lambda kv: -kv[1])
print('  binary by section: ' + ', '.join(f'{k} {v}' for k, v in top[:8]) + ' (kB)')
print(f'JSON "{label}":{{"rss":{status["VmRSS"]},"hwm":{status["VmHWM"]},"binary":{kinds["binary"]},"other_files":{kinds["other files"]},"anon":{kinds["anonymous"]},' +
      ','.join(f'"{k.lstrip(".")}":{v}' for k, v in top if k in ('.text', '.rodata', '.gopclntab', '.data', '.noptrdata')) + '}')
E

# idle.py PORT N: opens N connections, sends one request on each (one at a time, so one upstream
# connection serves them all), leaves them idle, says "open" and waits for stdin to close.
cat >"$W/idle.py" <<'E'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
req = b'GET / HTTP/1.1\r\nHost: rss\r\n\r\n'
conns = []
for _ in range(n):
    s = socket.create_connection(('127.0.0.1', port), timeout=10)
    s.sendall(req)
    got = b''
    while b'\r\n\r\n' not in got or len(got) < got.index(b'\r\n\r\n') + 4 + 100:
        chunk = s.recv(4096)
        if not chunk:
            sys.exit('connection closed before the response ended')
        got += chunk
    conns.append(s)
print('open', flush=True)
sys.stdin.read()
E

start "$LOAD_CPU" nginx -e "$W/upstream.err" -p "$W/" -c "$W/upstream.conf"
start "$PROXY_CPU" "$PROJECT_BIN" -c "$W/legate.yaml" --concurrency 1 --disable-hot-restart; LEG_PID=$PID
ready "$UP" || skip "the nginx upstream did not start"
ready "$LEG" || skip "Legate did not start"
report() { python3 "$W/report.py" "$LEG_PID" "$PROJECT_BIN" "$1" >>"$W/res"; }

report ready
taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$LEG/" >"$W/wrk"
report after_load
coproc IDLER { taskset -c "$LOAD_CPU" python3 "$W/idle.py" "$LEG" "$IDLE"; }
STARTED+=("$IDLER_PID")
read -r -t 300 line <&"${IDLER[0]}" || skip "could not open $IDLE idle connections"
[[ "$line" == open ]] || skip "idle.py: $line"
report "idle_$IDLE"
exec {IDLER[1]}>&-
wait "$IDLER_PID" 2>/dev/null || true

LOAD=$(cut -d' ' -f1 /proc/loadavg)
echo "Legate's resident memory (rig bootstrap, --concurrency 1; wrk -t1 -c$CONNS -d${DURATION}s: $(awk '/Requests\/sec/ {print $2}' "$W/wrk") req/s; load average $LOAD):"
grep -v '^JSON' "$W/res"
awk -v load="$LOAD" -v idle="$IDLE" '/^JSON/ { sub(/^JSON /, ""); v = v (v == "" ? "" : ",") $0 }
  END { printf "{\"bench\":\"rss\",\"load_avg\":%s,\"idle_conns\":%d,%s}\n", load, idle, v }' "$W/res"
