package tcpproxy

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"github.com/google/go-cmp/cmp"
	collogsv1 "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/accesslog/als/alstest"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock/clocktest"
)

// testFormat prints the fields of a TCP entry that a test can know exactly.
const testFormat = "%ACCESS_LOG_TYPE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %UPSTREAM_REQUEST_ATTEMPT_COUNT% %RESPONSE_CODE% %PROTOCOL% %REQ(:PATH)%\n"

// logFiles is a file access log manager whose files flush only when a test reads them.
type logFiles struct {
	*accesslog.Manager
	dir string
}

func newLogFiles(t *testing.T) *logFiles {
	t.Helper()
	m := accesslog.NewManager(accesslog.FileOptions{Clock: clocktest.NewFake(time.Unix(0, 0))})
	t.Cleanup(func() { m.Close() })
	return &logFiles{Manager: m, dir: t.TempDir()}
}

func (l *logFiles) path(name string) string { return filepath.Join(l.dir, name) }

// lines flushes the log name and returns its lines once there are at least n.
func (l *logFiles) lines(t *testing.T, name string, n int) []string {
	t.Helper()
	f, err := l.Open(l.path(name))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	waitFor(t, strconv.Itoa(n)+" lines in "+name, func() bool {
		if err := f.Flush(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(l.path(name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		got = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) == 0 {
			got = nil
		}
		return len(got) >= n
	})
	return got
}

// fileLog is one access_log entry writing testFormat (or format) to path, with an optional
// filter.
func fileLog(path, format, filter string) string {
	if format == "" {
		format = testFormat
	}
	s := `{name: envoy.access_loggers.file, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", path: "` +
		path + `", log_format: {text_format: ` + strconv.Quote(format) + `}}`
	if filter != "" {
		s += ", filter: " + filter
	}
	return s + "}"
}

func newLoggingProxy(t *testing.T, e *env, yml string, deps AccessLogDeps) *Proxy {
	t.Helper()
	return newProxyWith(t, e, yml, Config{AccessLogs: deps})
}

func TestAccessLogFile(t *testing.T) {
	dead := refusedAddr
	up := newUpstream(t, echo)
	tests := []struct {
		name  string
		extra string // cluster YAML
		proxy string // TcpProxy YAML without access_log
		hold  bool   // keep one proxied connection open first
		send  string // written, then the write side closed
		want  string
	}{
		{name: "proxied", proxy: "stat_prefix: t, cluster: echo", send: "hello, world",
			want: "TcpConnectionEnd - 12 12 echo " + up.addr() + " 1 0 - -"},
		{name: "no cluster", proxy: "stat_prefix: t, cluster: missing",
			want: "TcpConnectionEnd NC 0 0 - - 0 0 - -"},
		{name: "no healthy host", proxy: "stat_prefix: t, cluster: empty",
			want: "TcpConnectionEnd UH 0 0 empty - 0 0 - -"},
		{name: "connection refused", proxy: "stat_prefix: t, cluster: dead",
			want: "TcpConnectionEnd UF,URX 0 0 dead " + dead + " 1 0 - -"},
		{name: "connect attempts exceeded", proxy: "stat_prefix: t, cluster: dead, max_connect_attempts: 3",
			want: "TcpConnectionEnd UF,URX 0 0 dead " + dead + " 3 0 - -"},
		{name: "max_connections overflow", extra: "circuit_breakers: {thresholds: [{max_connections: 1}]}",
			proxy: "stat_prefix: t, cluster: echo", hold: true,
			want: "TcpConnectionEnd UO 0 0 echo - 0 0 - -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.extra, map[string][]string{"dead": {dead}, "echo": {up.addr()}, "empty": nil})
			logs := newLogFiles(t)
			p := newLoggingProxy(t, e, "{"+tt.proxy+", access_log: ["+fileLog(logs.path("a.log"), "", "")+"]}", AccessLogDeps{Files: logs.Manager})
			addr := serveLocal(t, p)
			if tt.hold {
				holdConn(t, addr)
			}
			c := dial(t, addr)
			io.WriteString(c, tt.send)
			c.CloseWrite()
			if got := readAll(t, c); got != tt.send && tt.send != "" {
				t.Fatalf("echo = %q; want %q", got, tt.send)
			}
			if got := logs.lines(t, "a.log", 1)[0]; got != tt.want {
				t.Errorf("access log line:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestAccessLogMaxDurationAndDefaultFormat(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	logs := newLogFiles(t)
	def := `{name: envoy.access_loggers.file, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", path: "` + logs.path("default.log") + `"}}`
	p := newLoggingProxy(t, e, "{stat_prefix: t, cluster: echo, max_downstream_connection_duration: 0.5s, access_log: ["+
		fileLog(logs.path("a.log"), "", "")+", "+def+"]}", AccessLogDeps{Files: logs.Manager})
	c := dial(t, serveLocal(t, p))
	io.WriteString(c, "ping")
	if got := readAll(t, c); got != "ping" {
		t.Fatalf("read %q before the duration limit closed the connection; want %q", got, "ping")
	}
	if got, want := logs.lines(t, "a.log", 1)[0], "TcpConnectionEnd DT 4 4 echo "+up.addr()+" 1 0 - -"; got != want {
		t.Errorf("access log line:\n got %q\nwant %q", got, want)
	}
	// Envoy's default format for a TCP connection: the HTTP operators print "-", the response
	// code 0, and the duration is that of the connection (at least the 500 ms limit, which is
	// long enough for the echo to come back on a loaded machine: 50 ms was not).
	line := logs.lines(t, "default.log", 1)[0]
	re := regexp.MustCompile(`^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] "- - -" 0 DT 4 4 (\d+) - "-" "-" "-" "-" "` + regexp.QuoteMeta(up.addr()) + `"$`)
	m := re.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("default format line %q; want it to match %s", line, re)
	}
	if ms, _ := strconv.Atoi(m[1]); ms < 500 {
		t.Errorf("%%DURATION%% = %d ms; want >= 500 (max_downstream_connection_duration)", ms)
	}
}

func TestAccessLogOptions(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	logs := newLogFiles(t)
	format := "%ACCESS_LOG_TYPE% %UPSTREAM_HOST% %BYTES_RECEIVED%\n"
	p := newLoggingProxy(t, e, `{stat_prefix: t, cluster: echo, access_log_options: {access_log_flush_interval: 0.005s,
flush_access_log_on_connected: true, flush_access_log_on_start: true}, access_log: [`+fileLog(logs.path("a.log"), format, "")+`]}`,
		AccessLogDeps{Files: logs.Manager})
	c := dial(t, serveLocal(t, p))
	io.WriteString(c, "abc")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	// The connection stays open while periodic entries are logged.
	lines := logs.lines(t, "a.log", 4)
	if d := cmp.Diff([]string{"TcpConnectionStart - 0", "TcpUpstreamConnected " + up.addr() + " 0"}, lines[:2]); d != "" {
		t.Errorf("first entries (-want +got):\n%s", d)
	}
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "TcpPeriodic "+up.addr()+" ") {
			t.Errorf("entry %q; want a TcpPeriodic entry while the connection is open", l)
		}
	}
	c.CloseWrite()
	readAll(t, c)
	waitFor(t, "the final entry", func() bool {
		lines = logs.lines(t, "a.log", 1)
		return strings.HasPrefix(lines[len(lines)-1], "TcpConnectionEnd")
	})
	if got, want := lines[len(lines)-1], "TcpConnectionEnd "+up.addr()+" 3"; got != want {
		t.Errorf("final entry %q; want %q", got, want)
	}
	for _, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(l, "TcpConnectionEnd") {
			t.Errorf("entries %q: TcpConnectionEnd is not only the last", lines)
		}
	}
}

func TestAccessLogFilter(t *testing.T) {
	dead := refusedAddr
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"dead": {dead}, "echo": {up.addr()}})
	logs := newLogFiles(t)
	failures := fileLog(logs.path("failures.log"), "", "{response_flag_filter: {flags: [UF, UO]}}")
	all := fileLog(logs.path("all.log"), "", "{log_type_filter: {types: [TcpConnectionEnd]}}")
	deps := AccessLogDeps{Files: logs.Manager}
	good := newLoggingProxy(t, e, "{stat_prefix: g, cluster: echo, access_log: ["+failures+", "+all+"]}", deps)
	bad := newLoggingProxy(t, e, "{stat_prefix: b, cluster: dead, access_log: ["+failures+", "+all+"]}", deps)
	readAll(t, dial(t, serveLocal(t, bad)))
	c := dial(t, serveLocal(t, good))
	c.CloseWrite()
	readAll(t, c)
	got := logs.lines(t, "all.log", 2)
	slices.Sort(got) // each connection's entry is logged after its client saw the close
	want := []string{
		"TcpConnectionEnd - 0 0 echo " + up.addr() + " 1 0 - -",
		"TcpConnectionEnd UF,URX 0 0 dead " + dead + " 1 0 - -",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("all.log (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want[1:], logs.lines(t, "failures.log", 1)); d != "" {
		t.Errorf("failures.log (-want +got):\n%s", d)
	}
}

func TestAccessLogConfigErrors(t *testing.T) {
	logs := newLogFiles(t)
	e := newEnv(t, "", map[string][]string{"echo": {"127.0.0.1:1"}})
	grpcLog := `{name: envoy.access_loggers.tcp_grpc, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.TcpGrpcAccessLogConfig",
common_config: {log_name: l, transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: als}}}}}`
	tests := []struct {
		name, log string
		deps      AccessLogDeps
		want      string
	}{
		{"http_grpc", `{name: envoy.access_loggers.http_grpc, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig"}}`,
			AccessLogDeps{Files: logs.Manager},
			`tcp_proxy "t": access_log[0].typed_config ("type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig", name "envoy.access_loggers.http_grpc"): only envoy.access_loggers.file, envoy.access_loggers.open_telemetry, envoy.access_loggers.stderr, envoy.access_loggers.stdout and envoy.access_loggers.tcp_grpc are implemented for the TCP proxy`},
		{"no files", fileLog(logs.path("x.log"), "", ""), AccessLogDeps{},
			`tcp_proxy "t": access_log[0].typed_config ("type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"): file access logs are not available`},
		{"no gRPC", grpcLog, AccessLogDeps{Files: logs.Manager},
			`tcp_proxy "t": access_log[0].typed_config ("type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.TcpGrpcAccessLogConfig"): gRPC access logs are not available`},
		{"empty path", `{name: f, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"}}`,
			AccessLogDeps{Files: logs.Manager}, `tcp_proxy "t": access_log[0].typed_config.path = ""; must not be empty`},
		{"bad format", fileLog(logs.path("x.log"), "%NOPE%", ""), AccessLogDeps{Files: logs.Manager},
			`tcp_proxy "t": access_log[0].typed_config: log_format.text_format: access log format "%NOPE%": position 0: unknown or unsupported operator NOPE`},
		{"bad stdout format", `{name: s, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog", log_format: {text_format: "%X("}}}`,
			AccessLogDeps{Files: logs.Manager}, `tcp_proxy "t": access_log[0].typed_config.log_format.text_format: access log format "%X(": position 2: operator X: missing ')'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.TCPProxyFromProto(tcpProxyFromYAML(t, "{stat_prefix: t, cluster: echo, access_log: ["+tt.log+"]}"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(Config{Proxy: cfg, Pools: e.pools, AccessLogs: tt.deps})
			if err == nil || err.Error() != tt.want {
				t.Errorf("New = %v;\nwant %s", err, tt.want)
			}
		})
	}
}

// address is a corev3.Address of "ip:port".
func address(t *testing.T, s string) *corev3.Address {
	t.Helper()
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: h, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}

func TestAccessLogGRPC(t *testing.T) {
	dead := refusedAddr
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"dead": {dead}, "echo": {up.addr()}})
	srv := alstest.Start(t)
	m := alstest.RunManager(t, func(ctx context.Context, cluster string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Addr)
	})
	grpcLog := `{name: envoy.access_loggers.tcp_grpc, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.TcpGrpcAccessLogConfig",
common_config: {log_name: tcp-edge, transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: als}}, buffer_flush_interval: 0.02s,
custom_tags: [{tag: zone, literal: {value: z1}}]}}}`
	deps := AccessLogDeps{GRPC: m}
	good := newLoggingProxy(t, e, "{stat_prefix: g, cluster: echo, access_log: ["+grpcLog+"]}", deps)
	bad := newLoggingProxy(t, e, "{stat_prefix: b, cluster: dead, access_log: ["+grpcLog+"]}", deps)
	proxyAddr := serveLocal(t, good)
	c := dial(t, proxyAddr)
	io.WriteString(c, "hello, world")
	c.CloseWrite()
	if got := readAll(t, c); got != "hello, world" {
		t.Fatalf("echo = %q", got)
	}
	var upLocal string
	select {
	case uc := <-up.conns:
		upLocal = uc.RemoteAddr().String()
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream saw no connection")
	}
	badAddr := serveLocal(t, bad)
	bc := dial(t, badAddr)
	readAll(t, bc)

	var entries []*accesslogdatav3.TCPAccessLogEntry
	deadline := time.After(5 * time.Second)
	for len(entries) < 2 {
		select {
		case msg := <-srv.Msgs:
			if len(entries) == 0 {
				if got := msg.GetIdentifier(); got.GetLogName() != "tcp-edge" || got.GetNode().GetId() != "node-1" {
					t.Errorf("first message identifier = %v; want log_name tcp-edge, node node-1", got)
				}
			}
			entries = append(entries, msg.GetTcpLogs().GetLogEntry()...)
		case <-deadline:
			t.Fatalf("received %d TCP entries; want 2", len(entries))
		}
	}
	// The two connections' final entries may be logged in either order.
	slices.SortFunc(entries, func(a, b *accesslogdatav3.TCPAccessLogEntry) int {
		return strings.Compare(b.GetCommonProperties().GetUpstreamCluster(), a.GetCommonProperties().GetUpstreamCluster())
	})
	for i, en := range entries {
		cp := en.GetCommonProperties()
		if cp.GetStartTime() == nil || cp.GetDuration() == nil {
			t.Errorf("entry %d: start_time %v, duration %v; want both set", i, cp.GetStartTime(), cp.GetDuration())
		}
	}
	want := []*accesslogdatav3.TCPAccessLogEntry{
		{
			CommonProperties: &accesslogdatav3.AccessLogCommon{
				SampleRate:                    1,
				DownstreamRemoteAddress:       address(t, c.LocalAddr().String()),
				DownstreamDirectRemoteAddress: address(t, c.LocalAddr().String()),
				DownstreamLocalAddress:        address(t, proxyAddr),
				UpstreamRemoteAddress:         address(t, up.addr()),
				UpstreamLocalAddress:          address(t, upLocal),
				UpstreamCluster:               "echo",
				UpstreamRequestAttemptCount:   1,
				CustomTags:                    map[string]string{"zone": "z1"},
				AccessLogType:                 accesslogdatav3.AccessLogType_TcpConnectionEnd,
			},
			ConnectionProperties: &accesslogdatav3.ConnectionProperties{ReceivedBytes: 12, SentBytes: 12},
		},
		{
			CommonProperties: &accesslogdatav3.AccessLogCommon{
				SampleRate:                    1,
				DownstreamRemoteAddress:       address(t, bc.LocalAddr().String()),
				DownstreamDirectRemoteAddress: address(t, bc.LocalAddr().String()),
				DownstreamLocalAddress:        address(t, badAddr),
				UpstreamRemoteAddress:         address(t, dead),
				UpstreamCluster:               "dead",
				UpstreamRequestAttemptCount:   1,
				ResponseFlags:                 &accesslogdatav3.ResponseFlags{UpstreamConnectionFailure: true, UpstreamRetryLimitExceeded: true},
				CustomTags:                    map[string]string{"zone": "z1"},
				AccessLogType:                 accesslogdatav3.AccessLogType_TcpConnectionEnd,
			},
			ConnectionProperties: &accesslogdatav3.ConnectionProperties{},
		},
	}
	if d := cmp.Diff(want, entries, protocmp.Transform(),
		protocmp.IgnoreFields(&accesslogdatav3.AccessLogCommon{}, "start_time", "duration")); d != "" {
		t.Errorf("TCPAccessLogEntry (-want +got):\n%s", d)
	}
	if w, d := m.Stats().LogsWritten.Value(), m.Stats().LogsDropped.Value(); w != 2 || d != 0 {
		t.Errorf("logs_written = %d, logs_dropped = %d; want 2, 0", w, d)
	}
}

// BenchmarkAccessLog is the cost of the final entry of a connection with one file access log
// in Envoy's default format: building the entry, formatting and buffering the line.
func BenchmarkAccessLog(b *testing.B) {
	m := accesslog.NewManager(accesslog.FileOptions{Clock: clocktest.NewFake(time.Unix(0, 0))})
	defer m.Close()
	f, err := m.Open(filepath.Join(b.TempDir(), "a.log"))
	if err != nil {
		b.Fatal(err)
	}
	format, err := accesslog.ParseText(accesslog.DefaultFormat, accesslog.Options{Hostname: "h"})
	if err != nil {
		b.Fatal(err)
	}
	p := &Proxy{cfg: &config.TCPProxy{StatPrefix: "b"}, logs: []accessLogger{{format: format, file: f}}}
	ci := &connInfo{start: time.Now(), local: "127.0.0.1:10000", remote: "127.0.0.1:50000", cluster: "db", host: "127.0.0.1:5432", attempts: 1}
	ci.rx.Store(1234)
	ci.tx.Store(5678)
	b.ReportAllocs()
	for b.Loop() {
		p.accessLog(ci, accesslog.TypeTCPPeriodic)
		if err := f.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}

// otelLogs is an OTLP LogsService (grpc-go, the generated OTLP service) on 127.0.0.1.
type otelLogs struct {
	collogsv1.UnimplementedLogsServiceServer
	exports chan *collogsv1.ExportLogsServiceRequest
}

func (c *otelLogs) Export(_ context.Context, req *collogsv1.ExportLogsServiceRequest) (*collogsv1.ExportLogsServiceResponse, error) {
	c.exports <- req
	return &collogsv1.ExportLogsServiceResponse{}, nil
}

// TestAccessLogOpenTelemetry checks envoy.access_loggers.open_telemetry on the TCP proxy: a
// real OTLP logs collector receives one record per connection, its body formatted from the
// TCP entry.
func TestAccessLogOpenTelemetry(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &otelLogs{exports: make(chan *collogsv1.ExportLogsServiceRequest, 8)}
	srv := grpc.NewServer()
	collogsv1.RegisterLogsServiceServer(srv, col)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	m := alstest.RunManager(t, func(ctx context.Context, cluster string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	})
	otelLog := `{name: envoy.access_loggers.open_telemetry, typed_config: {"@type": "type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig",
log_name: tcp-otel, grpc_service: {envoy_grpc: {cluster_name: als}}, buffer_flush_interval: 0.02s,
body: {string_value: "%UPSTREAM_CLUSTER% %BYTES_RECEIVED% %BYTES_SENT%"}}}`
	p := newLoggingProxy(t, e, "{stat_prefix: o, cluster: echo, access_log: ["+otelLog+"]}", AccessLogDeps{GRPC: m})
	c := dial(t, serveLocal(t, p))
	io.WriteString(c, "hello")
	c.CloseWrite()
	if got := readAll(t, c); got != "hello" {
		t.Fatalf("echo = %q", got)
	}
	select {
	case req := <-col.exports:
		recs := req.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()
		if len(recs) != 1 || recs[0].GetBody().GetStringValue() != "echo 5 5" {
			t.Errorf("records %v; want one with body \"echo 5 5\"", recs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no OTLP logs export reached the collector")
	}
}
