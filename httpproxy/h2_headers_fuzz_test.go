package httpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headUpstream is a raw HTTP/1.1 upstream that reads one request head per connection,
// answers 200 and closes. It records the heads it saw and the first one that an HTTP/1.1
// parser should never be handed: a field name that is not a token or a value with a control
// character (what a proxy must not let through into an HTTP/1 request line or header), or a
// body length for a request that has none.
type headUpstream struct {
	ln net.Listener

	mu    sync.Mutex // guards the fields below
	heads int
	bad   string
}

func newHeadUpstream(tb testing.TB) *headUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &headUpstream{ln: ln}
	var wg sync.WaitGroup
	tb.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); u.serve(c) }()
		}
	}()
	return u
}

func (u *headUpstream) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	br := bufio.NewReader(c)
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			break
		}
		lines = append(lines, line)
	}
	u.record(lines)
	io.WriteString(c, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
}

// record counts a head and checks its request line and fields.
func (u *headUpstream) record(lines []string) {
	problem := ""
	if len(lines) == 0 || strings.Count(lines[0], " ") != 2 || !strings.HasSuffix(lines[0], " HTTP/1.1") {
		problem = "request line"
	}
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		value = strings.TrimLeft(value, " \t")
		switch lower := strings.ToLower(name); {
		case !ok || !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(value):
			problem = "field " + l
		case lower == "transfer-encoding" || (lower == "content-length" && value != "0"):
			// Every request of the fuzzer ends with its HEADERS frame: a forwarded body
			// length the upstream would wait for desynchronizes the connection.
			problem = "a body the client never sent: " + l
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.heads++
	if problem != "" && u.bad == "" {
		u.bad = strings.Join(lines, "\n") + "\n(" + problem + ")"
	}
}

// take returns the heads seen and the first malformed one since the last call, and starts
// over.
func (u *headUpstream) take() (int, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	heads, bad := u.heads, u.bad
	u.heads, u.bad = 0, ""
	return heads, bad
}

// h2FuzzFields decodes the fuzzer's fields: NUL-separated "name\x01value" items.
func h2FuzzFields(in []byte) []hpack.HeaderField {
	var out []hpack.HeaderField
	for _, item := range bytes.Split(in, []byte{0}) {
		if len(item) == 0 {
			continue
		}
		name, value, _ := bytes.Cut(item, []byte{1})
		out = append(out, hpack.HeaderField{Name: string(name), Value: string(value)})
	}
	return out
}

// h2FuzzLimit is the header list size over which a request must never reach the upstream
// whatever else it holds: twice max_request_headers_kb (2) in name and value bytes.
const h2FuzzLimit = 4 << 10

// FuzzH2RequestHeaders drives Legate's HTTP/2 server side (the frame gate, x/net/http2's
// decoder, the connection manager's checks of pseudo-headers, names, values and its
// max_headers_count and max_request_headers_kb limits, the router) with one request per
// connection whose header block the fuzzer writes: as fields HPACK-encodes them (raw false;
// pseudo-headers, invalid names and values, many or long fields) or as the raw block (raw
// true), split into HEADERS and CONTINUATION frames of split bytes. Whatever comes in, the
// proxy must not crash, must answer the stream (a response, a reset or GOAWAY) within the
// wait, and whatever reaches the HTTP/1.1 upstream must be a well-formed request head, and
// never one from a header list far over the limits.
func FuzzH2RequestHeaders(f *testing.F) {
	up := newHeadUpstream(f)
	e := newEnv(f, envOptions{
		clusters: []string{staticCluster("web", "", up.ln.Addr().String())},
		hcm:      simpleHCM("web", "") + "max_request_headers_kb: 2\ncommon_http_protocol_options: {max_headers_count: 20}\n",
	})
	field := func(kv ...string) []byte {
		var b []byte
		for i := 0; i+1 < len(kv); i += 2 {
			b = append(b, kv[i]...)
			b = append(b, 1)
			b = append(b, kv[i+1]...)
			b = append(b, 0)
		}
		return b
	}
	get := field(":method", "GET", ":scheme", "http", ":authority", "a", ":path", "/")
	for _, extra := range [][]byte{
		nil,
		field("x-a", "b", "cookie", "a=1", "cookie", "b=2"),
		field("Upper", "x"),
		field("connection", "close"),
		field("te", "gzip"),
		field("te", "trailers"),
		field("x-a", "b\r\nx-injected: 1"),
		field("x-a", "b\x00c"),
		field("", "empty name"),
		field(":path", "/again"),
		field(":status", "200"),
		field("host", "other"),
		field("content-length", "5"),
		field("transfer-encoding", "chunked"),
		field("x-long", strings.Repeat("v", 3000)),
		bytes.Repeat(field("x-many", "v"), 25),
	} {
		f.Add(append(append([]byte{}, get...), extra...), false, uint16(0))
	}
	f.Add(field(":method", "GET", ":path", "/"), false, uint16(0))
	f.Add(field(":path", "/", ":method", "GET", ":scheme", "http", ":authority", "a"), false, uint16(5))
	f.Add(field(":method", "CONNECT", ":authority", "a:443"), false, uint16(0))
	f.Add(field(":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a", ":path", "/"), false, uint16(0))
	f.Add(field(":method", "GET", ":protocol", "websocket", ":scheme", "http", ":authority", "a", ":path", "/"), false, uint16(0))
	f.Add(field(":method", "G T", ":scheme", "http", ":authority", "a", ":path", "/ x"), false, uint16(0))
	f.Add(field(":method", "GET", ":scheme", "http", ":authority", "a b", ":path", "*"), false, uint16(0))
	f.Add([]byte{0x82, 0x86, 0x84, 0x41, 0x01, 'a'}, true, uint16(2))
	f.Add([]byte{0x3f, 0xe1, 0xff, 0xff, 0x0f}, true, uint16(0))
	f.Fuzz(func(t *testing.T, in []byte, raw bool, split uint16) {
		block, fields := in, h2FuzzFields(in)
		if !raw {
			var b bytes.Buffer
			enc := hpack.NewEncoder(&b)
			for _, hf := range fields {
				enc.WriteField(hf)
			}
			block = b.Bytes()
		}
		answer := h2FuzzExchange(t, e.addr, block, int(split))
		heads, bad := up.take()
		if bad != "" {
			t.Fatalf("the upstream got a malformed request head (answer %s):\n%s", answer, bad)
		}
		if !raw && answer == "200" {
			size := 0
			for _, hf := range fields {
				size += len(hf.Name) + len(hf.Value)
			}
			if size > h2FuzzLimit {
				t.Fatalf("a header list of %d bytes (limit 2 KiB) was forwarded", size)
			}
			if len(fields) > 2*20 {
				t.Fatalf("%d fields (max_headers_count 20) were forwarded", len(fields))
			}
		}
		if answer == "200" && heads == 0 {
			t.Fatal("200 without the upstream seeing a request")
		}
	})
}

// h2FuzzExchange sends block as the header block of stream 1 (HEADERS with END_STREAM, then
// CONTINUATIONs of split bytes when split is not 0) on a new prior-knowledge HTTP/2
// connection, and returns the stream's status, "reset", "goaway" or "closed".
func h2FuzzExchange(t *testing.T, addr string, block []byte, split int) string {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	fr.WriteSettings()
	if split <= 0 || split > len(block) {
		split = len(block)
	}
	first := block[:split]
	rest := block[split:]
	err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: len(rest) == 0})
	for err == nil && len(rest) > 0 {
		n := min(split, len(rest))
		err = fr.WriteContinuation(1, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	for {
		f, err := fr.ReadFrame()
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("no answer on stream 1 within %v", wait)
		case err != nil:
			return "closed"
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return f.PseudoValue("status")
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "reset"
			}
		case *http2.GoAwayFrame:
			return "goaway"
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	}
}
