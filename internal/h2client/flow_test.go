package h2client

import (
	"io"
	"net/http"
	"testing"
)

// TestStreamWindowReturned: a response many times the stream window arrives whole when the
// reader reads it in small pieces: window returns as it is read.
func TestStreamWindowReturned(t *testing.T) {
	const size = 16 << 20
	addr := xnetServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 16<<10)
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	c := dial(t, addr, Config{StreamWindow: 64 << 10})
	s := get(t, c)
	defer s.Close()
	if err := s.AwaitHead(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8<<10)
	total := 0
	for {
		n, err := s.Read(buf)
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if total != size {
		t.Fatalf("read %d bytes; want %d", total, size)
	}
}
