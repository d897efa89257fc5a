package h2client

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"golang.org/x/net/http2"
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

// gatedBody returns first, then waits for open before it ends.
type gatedBody struct {
	first []byte
	open  chan struct{}
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	<-b.open
	return 0, io.EOF
}

// TestEndWithNegativeWindow: a SETTINGS frame that lowers the initial window below what a
// stream has already sent leaves its window negative (RFC 9113 §6.9.2). The body's end is then
// an empty END_STREAM DATA frame, which flow control does not hold back; it once sliced the
// empty body by the negative window and panicked.
func TestEndWithNegativeWindow(t *testing.T) {
	const sent = 3000
	body := &gatedBody{first: bytes.Repeat([]byte("b"), sent), open: make(chan struct{})}
	ended := make(chan bool, 1)
	addr := scriptedServer(t, nil, func(u *scripted) {
		id := u.request()
		got := 0
		for got < sent {
			f, err := u.fr.ReadFrame()
			if err != nil {
				return
			}
			if d, ok := f.(*http2.DataFrame); ok {
				got += len(d.Data())
			}
		}
		u.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		for {
			f, err := u.fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && s.IsAck() {
				break
			}
		}
		close(body.open) // the client's window is now -3000: let its body end
		for {
			f, err := u.fr.ReadFrame()
			if err != nil {
				ended <- false
				return
			}
			if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() {
				ended <- len(d.Data()) == 0
				u.headers(id, true, ":status", "200")
				u.drain(nil)
				return
			}
		}
	})
	c := dial(t, addr, Config{})
	s := open(t, c, &Request{Method: "POST", Scheme: "http", Authority: "a", Path: "/", Body: body, ContentLength: -1})
	defer s.Close()
	if ok := <-ended; !ok {
		t.Fatal("the stream did not end with an empty END_STREAM DATA frame")
	}
	if err := s.AwaitHead(); err != nil || s.Status() != 200 {
		t.Fatalf("head: %d, %v; want 200", s.Status(), err)
	}
}
