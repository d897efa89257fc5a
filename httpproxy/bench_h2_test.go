package httpproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// BenchmarkProxyH2 measures proxied requests from prior-knowledge HTTP/2 clients, many
// streams at once on each connection (as h2load -m does): to an HTTP/1.1 upstream
// ("to-http1", the raw upstream of BenchmarkProxy) and to an HTTP/2 one ("to-h2c", Go's
// server). "direct-h2c" is the same client straight to the HTTP/2 upstream, for the ratio.
// Go's HTTP/2 client's allocations are nearly all of to-http1's allocs/op (to-http1-raw has none).
func BenchmarkProxyH2(b *testing.B) {
	e, h2up := h2BenchEnv(b)
	b.Run("to-http1", func(b *testing.B) { benchH2Client(b, e.addr, "/h1") })
	b.Run("to-h2c", func(b *testing.B) { benchH2Client(b, e.addr, "/h2") })
	b.Run("direct-h2c", func(b *testing.B) { benchH2Client(b, h2up, "/h2") })
	// to-http1 from clients that allocate nothing (rawH2Client, one connection each, one
	// stream at a time): its allocs/op are the proxy's and the upstream's alone.
	b.Run("to-http1-raw", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			rc := newRawH2Client(b, e.addr, "/h1")
			for pb.Next() {
				if st, err := rc.do(); err != nil || st != 200 {
					b.Errorf("request: status %d, %v", st, err)
					return
				}
			}
		})
	})
}

// h2BenchEnv is a proxy routing /h1 to the raw HTTP/1.1 upstream and the rest to an HTTP/2
// upstream (Go's server, 100-byte bodies), whose address it returns too.
func h2BenchEnv(tb testing.TB) (*env, string) {
	raw := rawUpstream(tb)
	body := make([]byte, 100)
	h2up := serveBothProtocols(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	}))
	e := newEnv(tb, envOptions{
		clusters: []string{staticCluster("h1", "", raw), staticCluster("h2", h2ClusterOptions, h2up.Listener.Addr().String())},
		hcm:      twoRouteHCM("/h1", "h1", "h2", ""),
	})
	return e, h2up.Listener.Addr().String()
}

// benchH2Client sends GETs for path to addr from 4×GOMAXPROCS goroutines sharing two
// HTTP/2 connections.
func benchH2Client(b *testing.B, addr, path string) {
	var conns []*http2.ClientConn
	tr := &http2.Transport{AllowHTTP: true}
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		cc, err := tr.NewClientConn(c)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, cc)
	}
	b.Cleanup(func() {
		for _, cc := range conns {
			cc.Close()
		}
	})
	b.ReportAllocs()
	b.SetParallelism(4)
	var next atomic.Uint32
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cc := conns[next.Add(1)%uint32(len(conns))]
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			resp, err := cc.RoundTrip(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// TestServeForLoad runs a proxy for an external load generator (h2load) when
// LEGATE_LOAD_SERVE is set: it prints "proxy <addr> h2c <addr>" (the listener, routing /h1 to
// the raw HTTP/1.1 upstream and the rest to the HTTP/2 upstream, and that upstream itself)
// and serves until its standard input closes.
func TestServeForLoad(t *testing.T) {
	if os.Getenv("LEGATE_LOAD_SERVE") == "" {
		t.Skip("set LEGATE_LOAD_SERVE to serve a proxy for h2load")
	}
	e, h2up := h2BenchEnv(t)
	fmt.Printf("proxy %s h2c %s\n", e.addr, h2up)
	io.Copy(io.Discard, os.Stdin)
}

// rawH2Client sends GETs on one prior-knowledge HTTP/2 connection, one stream at a time, with
// none of a real client's per-request allocations: a header block from one hpack.Encoder (all
// indexed after the first request) and frames read into one buffer, so that TestProxyH2Allocs
// counts the proxy's allocations and the upstream's.
type rawH2Client struct {
	c     net.Conn
	br    *bufio.Reader
	enc   *hpack.Encoder
	block bytes.Buffer
	out   []byte
	in    []byte
	head  [9]byte // a frame's header, here since io.ReadFull's would escape
	id    uint32
	path  string
	extra []hpack.HeaderField // regular fields sent after the pseudo-header fields
}

func newRawH2Client(tb testing.TB, addr, path string) *rawH2Client {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	rc := &rawH2Client{c: c, br: bufio.NewReaderSize(c, 16<<10), path: path, id: 1}
	rc.enc = hpack.NewEncoder(&rc.block)
	// The preface, empty SETTINGS, and a connection window for a long run of responses.
	rc.out = append(rc.out, http2.ClientPreface...)
	rc.out = appendH2Frame(rc.out, http2.FrameSettings, 0, 0, nil)
	rc.out = appendH2Frame(rc.out, http2.FrameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, 1<<30))
	if _, err := c.Write(rc.out); err != nil {
		tb.Fatal(err)
	}
	return rc
}

// appendH2Frame appends a frame of type t with flags and payload on stream id to b.
func appendH2Frame(b []byte, t http2.FrameType, flags http2.Flags, id uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, payload...)
}

// do sends one request on a new stream and reads frames until its response ends; it returns
// the response's :status (200 when its header block starts with the static table's 200).
func (rc *rawH2Client) do() (int, error) {
	rc.block.Reset()
	for _, f := range [...]hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "bench"}, {Name: ":path", Value: rc.path}} {
		rc.enc.WriteField(f)
	}
	for _, f := range rc.extra {
		rc.enc.WriteField(f)
	}
	rc.out = appendH2Frame(rc.out[:0], http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream, rc.id, rc.block.Bytes())
	id := rc.id
	rc.id += 2
	if _, err := rc.c.Write(rc.out); err != nil {
		return 0, err
	}
	status := 0
	head := rc.head[:]
	for {
		if _, err := io.ReadFull(rc.br, head); err != nil {
			return 0, err
		}
		n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
		t, flags, sid := http2.FrameType(head[3]), http2.Flags(head[4]), binary.BigEndian.Uint32(head[5:])&(1<<31-1)
		if cap(rc.in) < n {
			rc.in = make([]byte, n)
		}
		p := rc.in[:n]
		if _, err := io.ReadFull(rc.br, p); err != nil {
			return 0, err
		}
		switch {
		case t == http2.FrameSettings && flags&http2.FlagSettingsAck == 0:
			rc.out = appendH2Frame(rc.out[:0], http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
			if _, err := rc.c.Write(rc.out); err != nil {
				return 0, err
			}
		case t == http2.FrameGoAway || t == http2.FrameRSTStream:
			return 0, fmt.Errorf("frame %v on stream %d", t, sid)
		case sid != id:
		case t == http2.FrameHeaders && status == 0:
			if n == 0 || p[0] != 0x88 { // indexed :status 200
				return 0, fmt.Errorf("response header block %x", p)
			}
			status = 200
		}
		if sid == id && (t == http2.FrameHeaders || t == http2.FrameData) && flags&http2.FlagDataEndStream != 0 {
			return status, nil
		}
	}
}

// TestProxyH2Allocs pins the allocations of one request from an HTTP/2 client through the
// proxy to the HTTP/1.1 upstream (BenchmarkProxyH2's to-http1, the h2 round, without
// Go's HTTP/2 client, whose own allocations are nearly all of that benchmark's): none.
func TestProxyH2Allocs(t *testing.T) {
	e, _ := h2BenchEnv(t)
	rc := newRawH2Client(t, e.addr, "/h1")
	do := func() {
		if st, err := rc.do(); err != nil || st != 200 {
			t.Fatalf("request: status %d, %v", st, err)
		}
	}
	for range 100 {
		do()
	}
	if n := testing.AllocsPerRun(500, do); n != 0 {
		t.Errorf("a proxied HTTP/2 request allocates %v times; want 0", n)
	}
}
