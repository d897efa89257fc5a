package http1

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBody(t *testing.T) {
	tests := []struct {
		name    string
		framing Framing
		in      string
		body    string
		trailer []string
		rest    string
		err     error
	}{
		{name: "length", framing: Framing{Mode: Length, Length: 5}, in: "helloNEXT", body: "hello", rest: "NEXT"},
		{name: "none", framing: Framing{}, in: "NEXT", rest: "NEXT"},
		{name: "until close", framing: Framing{Mode: UntilClose}, in: "all of it", body: "all of it"},
		{
			name: "chunked", framing: Framing{Mode: Chunked},
			in:   "3;ext=\"a b\"\r\nabc\r\n10 \r\n0123456789abcdef\r\n0\r\nGrpc-Status: 0\r\nX: y\r\n\r\nNEXT",
			body: "abc0123456789abcdef", trailer: []string{"Grpc-Status: 0", "X: y"}, rest: "NEXT",
		},
		{name: "short length", framing: Framing{Mode: Length, Length: 5}, in: "hel", err: io.ErrUnexpectedEOF},
		{name: "chunk data too long", framing: Framing{Mode: Chunked}, in: "1\r\nab\r\n0\r\n\r\n", err: ErrBadChunk},
		{name: "bad size", framing: Framing{Mode: Chunked}, in: "zz\r\n", err: ErrBadChunk},
		{name: "empty size", framing: Framing{Mode: Chunked}, in: ";x\r\n", err: ErrBadChunk},
		{name: "size overflow", framing: Framing{Mode: Chunked}, in: "1000000000000000\r\n", err: ErrBadChunk},
		{name: "bare LF size line", framing: Framing{Mode: Chunked}, in: "3\nabc\r\n0\r\n\r\n", err: ErrBadChunk},
		{name: "bare LF after data", framing: Framing{Mode: Chunked}, in: "3\r\nabc\n0\r\n\r\n", err: ErrBadChunk},
		{name: "bare CR in trailer", framing: Framing{Mode: Chunked}, in: "0\r\nA: b\rc\r\n\r\n", err: ErrBadChunk},
		{name: "control in extension", framing: Framing{Mode: Chunked}, in: "3;\x01\r\nabc\r\n0\r\n\r\n", err: ErrBadChunk},
		{name: "truncated chunk", framing: Framing{Mode: Chunked}, in: "5\r\nab", err: io.ErrUnexpectedEOF},
		{name: "truncated trailer", framing: Framing{Mode: Chunked}, in: "0\r\nA: b\r\n", err: io.ErrUnexpectedEOF},
		{name: "long size line", framing: Framing{Mode: Chunked}, in: "1;" + strings.Repeat("x", MaxChunkLine) + "\r\n", err: ErrBadChunk},
		{name: "long trailer", framing: Framing{Mode: Chunked}, in: "0\r\n" + strings.Repeat("A: "+strings.Repeat("x", 1000)+"\r\n", 70) + "\r\n", err: ErrBadChunk},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 7, 1 << 20} {
			src := &pieceSource{in: []byte(tt.in), step: step}
			var m message
			err := readBody(src, tt.framing, &m)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("%s (step %d): error = %v; want %v", tt.name, step, err, tt.err)
			}
			if err != nil {
				continue
			}
			if m.Body != tt.body || string(src.rest()) != tt.rest {
				t.Errorf("%s (step %d): body %q, rest %q; want %q, %q", tt.name, step, m.Body, src.rest(), tt.body, tt.rest)
			}
			if diff := cmp.Diff(tt.trailer, m.Trailer); diff != "" {
				t.Errorf("%s (step %d): trailer (-want +got):\n%s", tt.name, step, diff)
			}
		}
	}
}

func TestChunkEncoding(t *testing.T) {
	b := AppendChunkSize(nil, 300)
	b = append(b, strings.Repeat("x", 300)+CRLF...)
	b = AppendLastChunk(b, []byte("A: b\r\n"))
	want := "12c\r\n" + strings.Repeat("x", 300) + "\r\n0\r\nA: b\r\n\r\n"
	if string(b) != want {
		t.Fatalf("encoded = %q; want %q", b, want)
	}
	var m message
	if err := readBody(&pieceSource{in: b, step: 5}, Framing{Mode: Chunked}, &m); err != nil || m.Body != strings.Repeat("x", 300) {
		t.Errorf("decoding the encoding: %q, %v", m.Body, err)
	}
}
