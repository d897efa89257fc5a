package http1

import (
	"errors"
	"testing"
)

// fieldsOf builds Fields from "name: value" lines.
func fieldsOf(t *testing.T, lines ...string) *Fields {
	t.Helper()
	var f Fields
	f.Reset()
	for _, l := range lines {
		name, value, err := SplitField(l)
		if err != nil {
			t.Fatalf("SplitField(%q): %v", l, err)
		}
		switch {
		case EqualFold(name, "content-length"):
			if err := f.ContentLength(value); err != nil {
				t.Fatalf("ContentLength(%q): %v", value, err)
			}
		case EqualFold(name, "transfer-encoding"):
			f.TransferEncoding(value)
		case EqualFold(name, "connection"):
			f.Connection(value)
		}
	}
	return &f
}

func TestResponseFraming(t *testing.T) {
	tests := []struct {
		name   string
		status int
		minor  int
		head   bool
		fields []string
		want   Framing
	}{
		{name: "length", status: 200, minor: 1, fields: []string{"Content-Length: 5"}, want: Framing{Mode: Length, Length: 5}},
		{name: "zero length", status: 200, minor: 1, fields: []string{"Content-Length: 0"}, want: Framing{}},
		{name: "HEAD ignores length", status: 200, minor: 1, head: true, fields: []string{"Content-Length: 5"}, want: Framing{}},
		{name: "204 ignores chunked", status: 204, minor: 1, fields: []string{"Transfer-Encoding: chunked"}, want: Framing{}},
		{name: "304 ignores length", status: 304, minor: 1, fields: []string{"Content-Length: 5"}, want: Framing{}},
		{name: "1xx", status: 103, minor: 1, fields: []string{"Content-Length: 5"}, want: Framing{}},
		{name: "101 closes for HTTP/1", status: 101, minor: 1, want: Framing{Close: true}},
		{name: "chunked last", status: 200, minor: 1, fields: []string{"Transfer-Encoding: gzip, chunked"}, want: Framing{Mode: Chunked}},
		{name: "chunked and length close", status: 200, minor: 1, fields: []string{"Content-Length: 3", "Transfer-Encoding: chunked"}, want: Framing{Mode: Chunked, Close: true}},
		{name: "chunked not last", status: 200, minor: 1, fields: []string{"Transfer-Encoding: chunked, gzip"}, want: Framing{Mode: UntilClose, Close: true}},
		{name: "nothing", status: 200, minor: 1, want: Framing{Mode: UntilClose, Close: true}},
		{name: "close", status: 200, minor: 1, fields: []string{"Connection: close", "Content-Length: 1"}, want: Framing{Mode: Length, Length: 1, Close: true}},
		{name: "http/1.0", status: 200, minor: 0, fields: []string{"Content-Length: 1"}, want: Framing{Mode: Length, Length: 1, Close: true}},
		{name: "http/1.0 keep-alive", status: 200, minor: 0, fields: []string{"Connection: Keep-Alive", "Content-Length: 1"}, want: Framing{Mode: Length, Length: 1}},
		{name: "http/1.0 ignores chunked", status: 200, minor: 0, fields: []string{"Connection: keep-alive", "Transfer-Encoding: chunked", "Content-Length: 2"}, want: Framing{Mode: Length, Length: 2, Close: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fieldsOf(t, tt.fields...).Response(tt.status, tt.minor, tt.head); got != tt.want {
				t.Errorf("Response(%d, %d, %v) = %+v; want %+v", tt.status, tt.minor, tt.head, got, tt.want)
			}
		})
	}
}

func TestRequestFraming(t *testing.T) {
	tests := []struct {
		name   string
		minor  int
		fields []string
		want   Framing
		err    error
	}{
		{name: "none", minor: 1, want: Framing{}},
		{name: "length", minor: 1, fields: []string{"Content-Length: 7"}, want: Framing{Mode: Length, Length: 7}},
		{name: "chunked", minor: 1, fields: []string{"Transfer-Encoding: chunked", "Connection: close"}, want: Framing{Mode: Chunked, Close: true}},
		{name: "http/1.0", minor: 0, fields: []string{"Content-Length: 7"}, want: Framing{Mode: Length, Length: 7, Close: true}},
		{name: "both", minor: 1, fields: []string{"Transfer-Encoding: chunked", "Content-Length: 7"}, err: ErrMalformed},
		{name: "other coding", minor: 1, fields: []string{"Transfer-Encoding: identity"}, err: ErrUnsupportedCoding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fieldsOf(t, tt.fields...).Request(tt.minor)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("Request() error = %v; want %v", err, tt.err)
			}
			if err == nil && got != tt.want {
				t.Errorf("Request() = %+v; want %+v", got, tt.want)
			}
		})
	}
	var f Fields
	f.Reset()
	for _, v := range []string{"", "-1", "1.0", "0x1", "1234567890123456789"} {
		if err := f.ContentLength(v); err == nil {
			t.Errorf("ContentLength(%q) = nil; want an error", v)
		}
	}
}
