package httpproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Event is what a raw HTTP/2 client saw on the connection, for comparison.
type h2Event struct {
	Kind     string // "headers", "data", "goaway", "rst", "closed"
	Stream   uint32
	Status   string // :status of headers
	Data     string
	EndSteam bool
}

// frameClient opens a prior-knowledge HTTP/2 connection (preface and SETTINGS sent) and
// returns a framer that decodes header blocks, with the connection under it.
func frameClient(t testing.TB, addr string) (*http2.Framer, net.Conn) {
	t.Helper()
	c := dialRaw(t, addr).c
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings()
	return fr, c
}

// block encodes a GET request's header block for path.
func requestBlock(path string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return b.Bytes()
}

// events reads frames until stream's response ends, a GOAWAY arrives or the connection
// closes, and returns what it saw (settings, pings and window updates are skipped).
func events(t testing.TB, fr *http2.Framer, stream uint32) []h2Event {
	t.Helper()
	var out []h2Event
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("no end of the connection or stream: %v (saw %+v)", err, out)
				}
			}
			return append(out, h2Event{Kind: "closed"})
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			out = append(out, h2Event{Kind: "headers", Stream: f.StreamID, Status: f.PseudoValue("status"), EndSteam: f.StreamEnded()})
		case *http2.DataFrame:
			out = append(out, h2Event{Kind: "data", Stream: f.StreamID, Data: string(f.Data()), EndSteam: f.StreamEnded()})
			if f.StreamEnded() && f.StreamID == stream {
				return out
			}
		case *http2.GoAwayFrame:
			out = append(out, h2Event{Kind: "goaway", Stream: f.LastStreamID})
		case *http2.RSTStreamFrame:
			out = append(out, h2Event{Kind: "rst", Stream: f.StreamID})
		}
	}
}

// TestH2RequestHeadersTimeout checks request_headers_timeout on HTTP/2 streams: a header
// block that does not end in time (HEADERS without END_HEADERS, no CONTINUATION) is answered
// 408 "request header timeout" and counted in downstream_rq_header_timeout, and the
// connection, which the client may use for nothing else until the block ends, closes after a
// GOAWAY; a block completed by CONTINUATION in time is served.
func TestH2RequestHeadersTimeout(t *testing.T) {
	up := h2cUpstream(t, "up")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      "request_headers_timeout: 0.2s\n" + simpleHCM("web", ""),
	})
	t.Run("incomplete header block", func(t *testing.T) {
		fr, _ := frameClient(t, e.addr)
		// A first stream completes: the GOAWAY must name it.
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/first"), EndHeaders: true, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		first := events(t, fr, 1)
		if len(first) < 2 || first[0].Status != "200" {
			t.Fatalf("first stream: %+v; want a 200 response", first)
		}
		block := requestBlock("/slow")
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block[:len(block)/2], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		want := []h2Event{
			{Kind: "headers", Stream: 3, Status: "408"},
			{Kind: "data", Stream: 3, Data: bodyRequestHeaderTimeout, EndSteam: true},
		}
		if diff := cmp.Diff(want, events(t, fr, 3)); diff != "" {
			t.Errorf("frames (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]h2Event{{Kind: "goaway", Stream: 1}, {Kind: "closed"}}, events(t, fr, 3)); diff != "" {
			t.Errorf("after the reply (-want +got):\n%s", diff)
		}
		if got := e.stat("http.ingress.downstream_rq_header_timeout"); got != 1 {
			t.Errorf("downstream_rq_header_timeout = %d; want 1", got)
		}
		if got := e.stat("http.ingress.downstream_rq_4xx"); got != 1 {
			t.Errorf("downstream_rq_4xx = %d; want 1", got)
		}
	})
	t.Run("frame not all sent", func(t *testing.T) {
		// The frame gate holds a HEADERS frame until it is whole; its timer starts anyway.
		fr, conn := frameClient(t, e.addr)
		var frame bytes.Buffer
		http2.NewFramer(&frame, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/slow"), EndHeaders: true, EndStream: true})
		if _, err := conn.Write(frame.Bytes()[:h2FrameHeaderLen+2]); err != nil {
			t.Fatal(err)
		}
		want := []h2Event{
			{Kind: "headers", Stream: 1, Status: "408"},
			{Kind: "data", Stream: 1, Data: bodyRequestHeaderTimeout, EndSteam: true},
		}
		if diff := cmp.Diff(want, events(t, fr, 1)); diff != "" {
			t.Errorf("frames (-want +got):\n%s", diff)
		}
	})
	t.Run("continuation in time", func(t *testing.T) {
		fr, _ := frameClient(t, e.addr)
		block := requestBlock("/split")
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:3], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteContinuation(1, true, block[3:]); err != nil {
			t.Fatal(err)
		}
		got := events(t, fr, 1)
		if len(got) < 2 || got[0].Status != "200" {
			t.Fatalf("frames %+v; want a 200 response", got)
		}
		if got := e.stat("http.ingress.downstream_rq_header_timeout"); got != 2 {
			t.Errorf("downstream_rq_header_timeout = %d; want still 2 (one per subtest above)", got)
		}
	})
}
