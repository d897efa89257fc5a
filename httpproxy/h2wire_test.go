package httpproxy

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
)

// writeRecorder is a net.Conn that records each Write as one element.
type writeRecorder struct {
	net.Conn
	writes chan []byte
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes <- bytes.Clone(p)
	return len(p), nil
}

func (w *writeRecorder) Close() error { return nil }

// frames encodes frames with http2's framer.
func frames(t *testing.T, write func(fr *http2.Framer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(http2.NewFramer(&b, nil)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestH2WireCork checks how response headers are held for the DATA after them: a write
// ending in HEADERS without END_STREAM waits and leaves with the next write, or alone after
// corkDelay, or before a close; other writes go at once.
func TestH2WireCork(t *testing.T) {
	headers := frames(t, func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: true})
	})
	headersEnd := frames(t, func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x88}, EndHeaders: true, EndStream: true})
	})
	data := frames(t, func(fr *http2.Framer) error { return fr.WriteData(1, true, []byte("body")) })
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	tests := []struct {
		name   string
		writes [][]byte
		close  bool
		hold   bool     // the cork waits longer than the test (it must not depend on the scheduler)
		want   [][]byte // the writes the socket sees
	}{
		{name: "headers then data", writes: [][]byte{headers, data}, hold: true, want: [][]byte{cat(headers, data)}},
		{name: "headers ending the stream", writes: [][]byte{headersEnd}, want: [][]byte{headersEnd}},
		{name: "data alone", writes: [][]byte{data}, want: [][]byte{data}},
		{name: "headers alone leave after the delay", writes: [][]byte{headers}, want: [][]byte{headers}},
		{name: "a frame split across writes is not held", writes: [][]byte{headers[:4], headers[4:], data},
			want: [][]byte{headers[:4], headers[4:], data}},
		{name: "close writes held headers", writes: [][]byte{headers}, close: true, hold: true, want: [][]byte{headers}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &writeRecorder{writes: make(chan []byte, 8)}
			w := &h2wire{Conn: rec}
			if tc.hold {
				w.corkFor = time.Hour
			}
			for _, p := range tc.writes {
				if n, err := w.Write(p); n != len(p) || err != nil {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(p))
				}
			}
			if tc.close {
				w.Close()
			}
			var got [][]byte
			for len(got) < len(tc.want) {
				select {
				case p := <-rec.writes:
					got = append(got, p)
				case <-time.After(wait):
					t.Fatalf("socket writes %q; want %q", got, tc.want)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("socket writes (-want +got):\n%s", diff)
			}
		})
	}
}
