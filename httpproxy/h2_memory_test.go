package httpproxy

import (
	"bytes"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/config"
)

// streamFlood is an attacking HTTP/2 client: it opens streams on one connection and never lets
// their responses finish (its initial stream window is 0, so no DATA can reach it), which
// keeps every stream the server admits busy in its handler.
type streamFlood struct {
	fr   *http2.Framer
	conn net.Conn
	resp atomic.Int64 // response HEADERS frames received: streams served
	rst  atomic.Int64 // RST_STREAM frames received: streams refused
	away atomic.Bool  // a GOAWAY arrived
	// What the server advertised: SETTINGS_MAX_CONCURRENT_STREAMS and the increment of the
	// connection's flow control window.
	maxStreams, connWindow atomic.Uint32
	done                   chan struct{}
}

func newStreamFlood(t testing.TB, addr string) *streamFlood {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	f := &streamFlood{fr: http2.NewFramer(c, c), conn: c, done: make(chan struct{})}
	if err := f.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	go f.read()
	return f
}

// read acknowledges the server's settings and counts refusals until the connection ends.
// It has framers of its own: each frame goes out in one Write, which net.Conn serializes.
func (f *streamFlood) read() {
	defer close(f.done)
	rd := http2.NewFramer(nil, f.conn)
	ack := http2.NewFramer(f.conn, nil)
	for {
		fr, err := rd.ReadFrame()
		if err != nil {
			return
		}
		switch fr := fr.(type) {
		case *http2.SettingsFrame:
			if !fr.IsAck() {
				if v, ok := fr.Value(http2.SettingMaxConcurrentStreams); ok {
					f.maxStreams.Store(v)
				}
				ack.WriteSettingsAck()
			}
		case *http2.WindowUpdateFrame:
			if fr.StreamID == 0 {
				f.connWindow.CompareAndSwap(0, fr.Increment)
			}
		case *http2.HeadersFrame:
			f.resp.Add(1)
		case *http2.RSTStreamFrame:
			f.rst.Add(1)
		case *http2.GoAwayFrame:
			f.away.Store(true)
		}
	}
}

// open sends n request HEADERS frames, each opening a stream (GET, END_STREAM).
func (f *streamFlood) open(t testing.TB, n int) {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, h := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/flood"}} {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	first := append([]byte(nil), block.Bytes()...)
	block.Reset()
	for _, h := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/flood"}} {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	again := block.Bytes() // every field from the dynamic table
	f.conn.SetWriteDeadline(time.Now().Add(wait))
	for i := range n {
		b := again
		if i == 0 {
			b = first
		}
		if err := f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: b, EndHeaders: true, EndStream: true}); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
}

// heldMemory is the heap and stack memory in use after a collection.
func heldMemory() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// TestH2StreamFloodBounded checks that one HTTP/2 connection cannot hold more than a bounded
// number of streams in the proxy whatever max_concurrent_streams says (Envoy's default,
// 2^31-1, here): an attacker opens 20,000 streams whose responses cannot be written (its
// window is 0); at most the granted number are served at once, the rest are refused, the
// memory held grows by a bounded amount, and a client on another connection is still served.
func TestH2StreamFloodBounded(t *testing.T) {
	const streams = 20000
	e := newEnv(t, envOptions{hcm: strings.Replace(webHCM, "route: {cluster: web}",
		`direct_response: {status: 200, body: {inline_string: "a body the attacker never reads"}}`, 1)})
	before := heldMemory()
	f := newStreamFlood(t, e.addr)
	f.open(t, streams)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(3 * wait)
	for f.resp.Load()+f.rst.Load() < streams && !f.away.Load() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("after %d streams: %d served, %d refused", streams, f.resp.Load(), f.rst.Load())
		}
	}
	if f.away.Load() {
		t.Fatalf("GOAWAY after %d served, %d refused; want refusals only", f.resp.Load(), f.rst.Load())
	}
	held := heldMemory()
	served := f.resp.Load()
	grown := int64(held) - int64(before)
	t.Logf("%d streams: %d served, %d refused; memory held grew by %d KiB (%d B per stream opened), goroutines %d",
		streams, served, f.rst.Load(), grown>>10, grown/streams, runtime.NumGoroutine())
	limit := int64(h2StreamCap(config.DefaultPerConnectionBufferLimit))
	if served > limit {
		t.Errorf("%d streams served at once; want at most %d", served, limit)
	}
	if got := f.maxStreams.Load(); got != uint32(limit) {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d; want %d", got, limit)
	}
	// The request bodies buffered: at most 4 buffer limits.
	if got := 65535 + f.connWindow.Load(); got > 4<<20 {
		t.Errorf("connection window %d; want at most 4 MiB", got)
	}
	// Generous: 64 KiB per stream served.
	if grown > limit<<16 {
		t.Errorf("memory held grew by %d bytes; want at most %d", grown, limit<<16)
	}

	resp, body := e.get(h2cClient(t), "/other")
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Errorf("other client: %s %s %q; want 200 over HTTP/2", resp.Proto, resp.Status, body)
	}
}
