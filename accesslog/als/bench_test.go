package als

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/stats"
)

func benchEntry() *accesslog.Entry {
	return &accesslog.Entry{
		StartTime: time.Unix(1700000000, 0), Method: "GET", Path: "/api/v1/items?id=42", Authority: "example.com", Scheme: "http",
		RequestHeaders:  http.Header{"User-Agent": {"bench/1.0"}, "X-Request-Id": {"2b9f0c1e-4d7a-4c1a-9f1e-3a2b1c0d9e8f"}, "X-Custom": {"v"}},
		ResponseHeaders: http.Header{"Content-Type": {"text/plain"}},
		Protocol:        "HTTP/1.1", ResponseCode: 200, ResponseCodeDetails: "via_upstream", BytesReceived: 0, BytesSent: 1234,
		Duration: 3 * time.Millisecond, ResponseDuration: 2 * time.Millisecond,
		DownstreamRemoteAddress: "127.0.0.1:50000", DownstreamLocalAddress: "127.0.0.1:10000", UpstreamHost: "127.0.0.1:8080",
		UpstreamCluster: "web", RouteName: "r", UpstreamRequestAttemptCount: 1,
	}
}

func benchLogger(b *testing.B, maxBytes int) *HTTPLogger {
	store, err := stats.New(stats.Config{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewManager(Config{Dial: func(context.Context, string) (net.Conn, error) { return nil, errors.New("down") }, Stats: store})
	if err != nil {
		b.Fatal(err)
	}
	l, err := m.newHTTPLogger(settings{logName: "b", cluster: "als", authority: "als", interval: time.Second, maxBytes: maxBytes}, httpSettings{reqHeaders: []string{"x-custom"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.conn.Close() })
	return l
}

// BenchmarkEntry is the cost of turning a finished request into an HTTPAccessLogEntry.
func BenchmarkEntry(b *testing.B) {
	l := benchLogger(b, DefaultBufferSizeBytes)
	e := benchEntry()
	b.ReportAllocs()
	for b.Loop() {
		_ = l.entry(e)
	}
}

// BenchmarkLogStreamDown is Log with the service unreachable: the buffer is full, so each
// entry is converted, counted and dropped.
func BenchmarkLogStreamDown(b *testing.B) {
	l := benchLogger(b, 1)
	e := benchEntry()
	l.Log(e) // fills the buffer
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
	}
}

// BenchmarkTCPEntry is the cost of turning a closed TCP connection into a TCPAccessLogEntry.
func BenchmarkTCPEntry(b *testing.B) {
	l := &TCPLogger{client: &client[*accesslogdatav3.TCPAccessLogEntry]{}}
	e := &accesslog.Entry{
		StartTime: time.Unix(1700000000, 0), BytesReceived: 1234, BytesSent: 5678, Duration: 3 * time.Second,
		DownstreamRemoteAddress: "127.0.0.1:50000", DownstreamDirectRemoteAddress: "127.0.0.1:50000",
		DownstreamLocalAddress: "127.0.0.1:10000", UpstreamHost: "127.0.0.1:5432", UpstreamLocalAddress: "127.0.0.1:41000",
		UpstreamCluster: "db", UpstreamRequestAttemptCount: 1, Type: accesslog.TypeTCPConnectionEnd,
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = l.entry(e)
	}
}
