package e2e

import (
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
)

// findTCP returns the first of entries logged for the downstream client at addr with the type.
func findTCP(entries []*accesslogdatav3.TCPAccessLogEntry, addr string, typ accesslogdatav3.AccessLogType) *accesslogdatav3.TCPAccessLogEntry {
	for _, e := range entries {
		cp := e.GetCommonProperties()
		sa := cp.GetDownstreamRemoteAddress().GetSocketAddress()
		if net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))) == addr && cp.GetAccessLogType() == typ {
			return e
		}
	}
	return nil
}

// TestTCPAccessLog runs the binary with two TCP proxy listeners, one to an echo server and
// one to a closed port, each with a file access log (only the final entry of each
// connection, by log_type_filter) and a tcp_grpc access log to a real AccessLogService with
// periodic entries every 50 ms. The file holds Envoy's TCP fields (flags, bytes, upstream
// host) and the service receives TCPAccessLogEntry messages, periodic ones while the
// connection is open and a final one with the byte counts when it closes.
func TestTCPAccessLog(t *testing.T) {
	echoPort := echoServer(t)
	// Port 1 refuses: unprivileged processes cannot bind it. A closed ephemeral port could be
	// taken by another test, or let the kernel connect a socket to itself (TCP simultaneous
	// open when it picks that port as the source).
	const deadAddr = "127.0.0.1:1"

	collector := startALS(t, func(m *alsv3.StreamAccessLogsMessage) []*accesslogdatav3.TCPAccessLogEntry {
		return m.GetTcpLogs().GetLogEntry()
	})
	find := func(addr string, typ accesslogdatav3.AccessLogType) *accesslogdatav3.TCPAccessLogEntry {
		_, entries := collector.seen()
		return findTCP(entries, addr, typ)
	}
	logPath := filepath.Join(t.TempDir(), "tcp.log")
	proxy := func(name, cluster string) string {
		return `
  - name: ` + name + `
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: ` + name + `
          cluster: ` + cluster + `
          access_log_options: {access_log_flush_interval: 0.05s}
          access_log:
          - name: envoy.access_loggers.file
            filter: {log_type_filter: {types: [TcpConnectionEnd]}}
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + logPath + `
              log_format: {text_format: "` + name + ` %ACCESS_LOG_TYPE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %RESPONSE_CODE% %PROTOCOL%\n"}
          - name: envoy.access_loggers.tcp_grpc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.TcpGrpcAccessLogConfig
              common_config:
                log_name: tcp-e2e
                transport_api_version: V3
                grpc_service: {envoy_grpc: {cluster_name: als}}
                buffer_flush_interval: 0.05s`
	}
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:` + proxy("echo", "echo") + proxy("refused", "dead") + `
  clusters:
` + clusterYAML("echo", loopback(echoPort), false) + clusterYAML("dead", deadAddr, false) + clusterYAML("als", collector.addr, true)
	p := start(t, "-c", writeConfig(t, cfg), "--file-flush-interval-msec", "20")

	// A proxied connection held open until the service has a periodic entry for it.
	conn, err := net.DialTimeout("tcp", p.listenerAddr("echo"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	const msg = "hello, legate\n"
	io.WriteString(conn, msg)
	if _, err := io.ReadFull(conn, make([]byte, len(msg))); err != nil {
		t.Fatalf("echo: %v", err)
	}
	client := conn.LocalAddr().String()
	eventually(t, "a TcpPeriodic entry", func() bool { return find(client, accesslogdatav3.AccessLogType_TcpPeriodic) != nil })
	if e := find(client, accesslogdatav3.AccessLogType_TcpPeriodic); !e.GetCommonProperties().GetIntermediateLogEntry() ||
		e.GetConnectionProperties().GetReceivedBytes() != uint64(len(msg)) {
		t.Errorf("periodic entry %v; want intermediate_log_entry and received_bytes %d", e, len(msg))
	}
	conn.(*net.TCPConn).CloseWrite()
	if rest, err := io.ReadAll(conn); err != nil || len(rest) != 0 {
		t.Fatalf("after the half-close read %q, %v; want EOF", rest, err)
	}
	conn.Close()

	refused, err := net.DialTimeout("tcp", p.listenerAddr("refused"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	refused.SetDeadline(time.Now().Add(20 * time.Second))
	if rest, err := io.ReadAll(refused); err != nil || len(rest) != 0 {
		t.Fatalf("refused connection read %q, %v; want EOF", rest, err)
	}
	refusedClient := refused.LocalAddr().String()

	got := logLines(t, logPath, 2)
	slices.Sort(got)
	n := strconv.Itoa(len(msg))
	want := []string{
		"echo TcpConnectionEnd - " + n + " " + n + " echo 127.0.0.1:" + strconv.Itoa(echoPort) + " 0 -",
		"refused TcpConnectionEnd UF,URX 0 0 dead " + deadAddr + " 0 -",
	}
	if !slices.Equal(got, want) {
		t.Errorf("file access log:\n got %q\nwant %q", got, want)
	}

	var end, failed *accesslogdatav3.TCPAccessLogEntry
	eventually(t, "the final entries at the access log service", func() bool {
		end = find(client, accesslogdatav3.AccessLogType_TcpConnectionEnd)
		failed = find(refusedClient, accesslogdatav3.AccessLogType_TcpConnectionEnd)
		return end != nil && failed != nil
	})
	cp := end.GetCommonProperties()
	if cp.GetUpstreamCluster() != "echo" || cp.GetUpstreamRemoteAddress().GetSocketAddress().GetPortValue() != uint32(echoPort) ||
		cp.GetIntermediateLogEntry() || cp.GetDuration() == nil || cp.GetUpstreamLocalAddress() == nil {
		t.Errorf("final entry common_properties %v; want cluster echo, upstream port %d, a duration and an upstream local address", cp, echoPort)
	}
	if c := end.GetConnectionProperties(); c.GetReceivedBytes() != uint64(len(msg)) || c.GetSentBytes() != uint64(len(msg)) {
		t.Errorf("final entry connection_properties %v; want %d bytes each way", c, len(msg))
	}
	if f := failed.GetCommonProperties().GetResponseFlags(); !f.GetUpstreamConnectionFailure() || !f.GetUpstreamRetryLimitExceeded() {
		t.Errorf("refused connection response_flags %v; want upstream_connection_failure and upstream_retry_limit_exceeded", f)
	}
	if logName, _ := collector.seen(); logName != "tcp-e2e" {
		t.Errorf("identifier log_name = %q; want tcp-e2e", logName)
	}
	if _, _, body := p.get("/stats?filter=^access_logs.grpc_access_log.logs_dropped$"); body != "access_logs.grpc_access_log.logs_dropped: 0\n" {
		t.Errorf("logs_dropped: %q; want 0", body)
	}
}
