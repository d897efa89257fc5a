package h2client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// xnetServer serves h on 127.0.0.1 with x/net/http2's server, prior knowledge.
func xnetServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	srv := &http2.Server{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(c, &http2.ServeConnOpts{Handler: h})
		}
	}()
	return ln.Addr().String()
}

// dial opens a client connection to addr.
func dial(t *testing.T, addr string, cfg Config) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// open reserves a slot and opens a stream for r.
func open(t *testing.T, c *Conn, r *Request) *Stream {
	t.Helper()
	if !c.Reserve() {
		t.Fatal("no stream slot")
	}
	s, err := c.Open(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// field returns the first value of name in the stream's head.
func field(raw []byte, lens [][2]int32, name string) string {
	off := 0
	for _, l := range lens {
		n, v := int(l[0]), int(l[1])
		if string(raw[off:off+n]) == name {
			return string(raw[off+n : off+n+v])
		}
		off += n + v
	}
	return ""
}

// TestXNetServer: requests against x/net/http2's server: a GET, a POST whose body is larger
// than every window (flow control both ways), request and response trailers, and many streams
// at once on the connection.
func TestXNetServer(t *testing.T) {
	addr := xnetServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Trailer", "X-Sum")
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Path", r.URL.Path)
		w.Header().Set("X-Header", r.Header.Get("X-Test"))
		w.Header().Set("X-Req-Trailer", r.Trailer.Get("X-Req"))
		w.Write(body)
		w.Header().Set("X-Sum", fmt.Sprint(len(body)))
	}))
	c := dial(t, addr, Config{StreamWindow: 70000, ConnWindow: 100000})
	big := bytes.Repeat([]byte("0123456789"), 50000) // 500 kB: several windows each way
	t.Run("GET", func(t *testing.T) {
		s := open(t, c, &Request{Method: "GET", Scheme: "http", Authority: "a", Path: "/x", Header: []Field{{Name: "X-Test", Value: "v"}}})
		defer s.Close()
		if err := s.AwaitHead(); err != nil {
			t.Fatal(err)
		}
		raw, lens := s.RawHead()
		if s.Status() != 200 || field(raw, lens, "x-method") != "GET" || field(raw, lens, "x-path") != "/x" || field(raw, lens, "x-header") != "v" {
			t.Fatalf("head %d %q", s.Status(), raw)
		}
		if b, err := io.ReadAll(s); err != nil || len(b) != 0 {
			t.Fatalf("body %q, %v", b, err)
		}
		if raw, lens := s.RawTrailer(); field(raw, lens, "x-sum") != "0" {
			t.Fatalf("trailers %q", raw)
		}
	})
	t.Run("POST with trailers", func(t *testing.T) {
		s := open(t, c, &Request{Method: "POST", Scheme: "http", Authority: "a", Path: "/", Body: bytes.NewReader(big), ContentLength: -1,
			Trailer: map[string][]string{"X-Req": {"t"}}})
		defer s.Close()
		if err := s.AwaitHead(); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(s)
		if err != nil || !bytes.Equal(b, big) {
			t.Fatalf("body of %d bytes, %v; want the %d sent", len(b), err, len(big))
		}
		raw, lens := s.RawHead()
		if got := field(raw, lens, "x-req-trailer"); got != "t" {
			t.Errorf("request trailer seen by the server = %q; want t", got)
		}
		if raw, lens := s.RawTrailer(); field(raw, lens, "x-sum") != fmt.Sprint(len(big)) {
			t.Fatalf("trailers %q", raw)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !c.Reserve() {
					t.Error("no slot")
					return
				}
				body := strings.Repeat("x", i*1000)
				s, err := c.Open(context.Background(), &Request{Method: "PUT", Scheme: "http", Authority: "a", Path: "/", Body: strings.NewReader(body), ContentLength: int64(len(body))})
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				if err := s.AwaitHead(); err != nil {
					t.Error(err)
					return
				}
				if b, err := io.ReadAll(s); err != nil || string(b) != body {
					t.Errorf("stream %d: %d bytes, %v", i, len(b), err)
				}
			}()
		}
		wg.Wait()
	})
}

// scripted is an upstream that speaks raw frames: it reads the preface, sends its SETTINGS,
// and runs script on the connection.
type scripted struct {
	fr  *http2.Framer
	nc  net.Conn
	enc *hpack.Encoder
	buf bytes.Buffer
}

func scriptedServer(t *testing.T, settings []http2.Setting, script func(u *scripted)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil {
			return
		}
		u := &scripted{fr: http2.NewFramer(nc, nc), nc: nc}
		u.enc = hpack.NewEncoder(&u.buf)
		u.fr.WriteSettings(settings...)
		script(u)
	}()
	return ln.Addr().String()
}

// block encodes fields (name, value pairs).
func (u *scripted) block(kv ...string) []byte {
	u.buf.Reset()
	for i := 0; i < len(kv); i += 2 {
		u.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return append([]byte(nil), u.buf.Bytes()...)
}

// headers sends a header block on stream id.
func (u *scripted) headers(id uint32, end bool, kv ...string) {
	u.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: u.block(kv...), EndHeaders: true, EndStream: end})
}

// request reads frames until a request's HEADERS, answering SETTINGS; it returns the stream
// id, 0 when the client went away.
func (u *scripted) request() uint32 {
	for {
		f, err := u.fr.ReadFrame()
		if err != nil {
			return 0
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				u.fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			return f.StreamID
		}
	}
}

// drain reads until the client closes the connection, and reports the RST_STREAM codes seen.
func (u *scripted) drain(resets chan<- http2.ErrCode) {
	for {
		f, err := u.fr.ReadFrame()
		if err != nil {
			return
		}
		if r, ok := f.(*http2.RSTStreamFrame); ok && resets != nil {
			resets <- r.ErrCode
		}
	}
}

// get opens a GET on c.
func get(t *testing.T, c *Conn) *Stream {
	return open(t, c, &Request{Method: "GET", Scheme: "http", Authority: "a", Path: "/"})
}

// wantStreamError reports whether err is a stream error with code.
func wantStreamError(t *testing.T, err error, code http2.ErrCode, remote bool) {
	t.Helper()
	var se *StreamError
	if !errors.As(err, &se) || se.Code != code || se.Remote != remote {
		t.Fatalf("error %v; want a stream error %v (remote %v)", err, code, remote)
	}
}

// awaitErr waits for the stream's response to fail.
func readAll(s *Stream) ([]byte, error) {
	if err := s.AwaitHead(); err != nil {
		return nil, err
	}
	return io.ReadAll(s)
}

// TestHostileUpstreams: a scripted upstream misbehaves; each case fails its stream or
// connection with the error it names, and nothing hangs.
func TestHostileUpstreams(t *testing.T) {
	t.Run("RST_STREAM mid-body", func(t *testing.T) {
		addr := scriptedServer(t, nil, func(u *scripted) {
			id := u.request()
			u.headers(id, false, ":status", "200")
			u.fr.WriteData(id, false, []byte("part"))
			u.fr.WriteRSTStream(id, http2.ErrCodeInternal)
			u.drain(nil)
		})
		s := get(t, dial(t, addr, Config{}))
		defer s.Close()
		b, err := readAll(s)
		if string(b) != "part" {
			t.Errorf("body %q before the reset; want part", b)
		}
		wantStreamError(t, err, http2.ErrCodeInternal, true)
	})
	t.Run("GOAWAY with streams in flight", func(t *testing.T) {
		addr := scriptedServer(t, nil, func(u *scripted) {
			first := u.request()
			u.request()
			u.fr.WriteGoAway(first, http2.ErrCodeNo, nil)
			u.headers(first, true, ":status", "204")
			u.drain(nil)
		})
		c := dial(t, addr, Config{})
		s1, s2 := get(t, c), get(t, c)
		if _, err := readAll(s2); !errors.Is(err, ErrUnprocessed) {
			t.Errorf("stream above the last stream id: %v; want ErrUnprocessed", err)
		}
		s2.Close()
		if _, err := readAll(s1); err != nil || s1.Status() != 204 {
			t.Errorf("stream up to the last stream id: %d, %v; want 204", s1.Status(), err)
		}
		if c.Reserve() {
			t.Error("a connection that received GOAWAY takes a new stream")
		}
		s1.Close()
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the connection did not close after its last stream")
		}
	})
	t.Run("REFUSED_STREAM", func(t *testing.T) {
		addr := scriptedServer(t, nil, func(u *scripted) {
			u.fr.WriteRSTStream(u.request(), http2.ErrCodeRefusedStream)
			u.drain(nil)
		})
		s := get(t, dial(t, addr, Config{}))
		defer s.Close()
		if _, err := readAll(s); !errors.Is(err, ErrUnprocessed) {
			t.Errorf("error %v; want ErrUnprocessed", err)
		}
	})
	t.Run("window never opened", func(t *testing.T) {
		resets := make(chan http2.ErrCode, 1)
		addr := scriptedServer(t, []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}, func(u *scripted) {
			id := u.request()
			u.headers(id, false, ":status", "200")
			u.drain(resets)
		})
		c := dial(t, addr, Config{})
		s := open(t, c, &Request{Method: "POST", Scheme: "http", Authority: "a", Path: "/", Body: strings.NewReader("never sent"), ContentLength: 10})
		if err := s.AwaitHead(); err != nil {
			t.Fatal(err)
		}
		s.Close() // the body sender waits for window: Close ends it
		if code := <-resets; code != http2.ErrCodeCancel {
			t.Errorf("reset %v; want CANCEL", code)
		}
	})
	t.Run("headers too large", func(t *testing.T) {
		addr := scriptedServer(t, nil, func(u *scripted) {
			id := u.request()
			u.headers(id, true, ":status", "200", "x-big", strings.Repeat("b", 3000))
			u.drain(nil)
		})
		s := get(t, dial(t, addr, Config{MaxHeaderBytes: 1000}))
		defer s.Close()
		_, err := readAll(s)
		wantStreamError(t, err, http2.ErrCodeProtocol, false)
	})
	t.Run("DATA on a closed stream", func(t *testing.T) {
		addr := scriptedServer(t, nil, func(u *scripted) {
			id := u.request()
			u.headers(id, false, ":status", "200")
			u.fr.WriteData(id, true, []byte("ok"))
			u.fr.WriteData(id, false, []byte("after the end"))
			u.headers(id, true, "x-late", "1")
			id = u.request()
			u.headers(id, true, ":status", "200")
			u.drain(nil)
		})
		c := dial(t, addr, Config{})
		s := get(t, c)
		if b, err := readAll(s); err != nil || string(b) != "ok" {
			t.Fatalf("body %q, %v; want ok", b, err)
		}
		s.Close()
		s = get(t, c) // the connection still serves streams
		defer s.Close()
		if _, err := readAll(s); err != nil || s.Status() != 200 {
			t.Fatalf("next stream: %d, %v", s.Status(), err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		addr := scriptedServer(t, nil, func(u *scripted) {
			u.request()
			u.nc.Write([]byte("HTTP/1.1 200 OK\r\n\r\nthis is not a frame"))
			u.drain(nil)
		})
		c := dial(t, addr, Config{})
		// The garbage may close the connection while Open still writes (frames queued
		// behind the request's, such as a SETTINGS ack): then Open itself fails, with the
		// same error.
		if !c.Reserve() {
			t.Fatal("no stream slot")
		}
		s, err := c.Open(context.Background(), &Request{Method: "GET", Scheme: "http", Authority: "a", Path: "/"})
		if err == nil {
			defer s.Close()
			_, err = readAll(s)
		}
		if !errors.Is(err, ErrClosed) {
			t.Errorf("error %v; want ErrClosed", err)
		}
	})
	for _, tc := range []struct {
		name   string
		script func(u *scripted, id uint32)
		body   string
	}{
		{"missing :status", func(u *scripted, id uint32) { u.headers(id, true, "x-a", "1") }, ""},
		{"invalid :status", func(u *scripted, id uint32) { u.headers(id, true, ":status", "2000") }, ""},
		{"request pseudo-field", func(u *scripted, id uint32) { u.headers(id, true, ":status", "200", ":path", "/") }, ""},
		{"upper-case name", func(u *scripted, id uint32) { u.headers(id, true, ":status", "200", "X-A", "1") }, ""},
		{"101", func(u *scripted, id uint32) { u.headers(id, true, ":status", "101") }, ""},
		{"DATA beyond content-length", func(u *scripted, id uint32) {
			u.headers(id, false, ":status", "200", "content-length", "2")
			u.fr.WriteData(id, true, []byte("abc"))
		}, ""},
		{"body short of content-length", func(u *scripted, id uint32) {
			u.headers(id, false, ":status", "200", "content-length", "5")
			u.fr.WriteData(id, true, []byte("abc"))
		}, "abc"},
		{"trailers without END_STREAM", func(u *scripted, id uint32) {
			u.headers(id, false, ":status", "200")
			u.headers(id, false, "x-t", "1")
		}, ""},
		{"pseudo-field in trailers", func(u *scripted, id uint32) {
			u.headers(id, false, ":status", "200")
			u.headers(id, true, ":status", "200")
		}, ""},
		{"DATA before the head", func(u *scripted, id uint32) { u.fr.WriteData(id, true, []byte("x")) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resets := make(chan http2.ErrCode, 1)
			addr := scriptedServer(t, nil, func(u *scripted) {
				tc.script(u, u.request())
				u.drain(resets)
			})
			s := get(t, dial(t, addr, Config{}))
			defer s.Close()
			b, err := readAll(s)
			wantStreamError(t, err, http2.ErrCodeProtocol, false)
			if string(b) != tc.body {
				t.Errorf("body %q; want %q", b, tc.body)
			}
			if code := <-resets; code != http2.ErrCodeProtocol {
				t.Errorf("reset %v; want PROTOCOL_ERROR", code)
			}
		})
	}
	t.Run("1xx then trailers", func(t *testing.T) {
		addr := scriptedServer(t, nil, func(u *scripted) {
			id := u.request()
			u.headers(id, false, ":status", "100")
			u.headers(id, false, ":status", "103", "link", "</a>")
			u.headers(id, false, ":status", "200", "x-final", "1")
			u.fr.WriteData(id, false, []byte("body"))
			u.headers(id, true, "grpc-status", "0")
			u.drain(nil)
		})
		s := get(t, dial(t, addr, Config{}))
		defer s.Close()
		b, err := readAll(s)
		raw, lens := s.RawHead()
		if err != nil || s.Status() != 200 || string(b) != "body" || field(raw, lens, "x-final") != "1" || field(raw, lens, "link") != "" {
			t.Fatalf("%d %q %q, %v", s.Status(), raw, b, err)
		}
		if raw, lens := s.RawTrailer(); field(raw, lens, "grpc-status") != "0" {
			t.Fatalf("trailers %q", raw)
		}
	})
}

// TestMaxConcurrentStreams: the peer's SETTINGS_MAX_CONCURRENT_STREAMS bounds Reserve.
func TestMaxConcurrentStreams(t *testing.T) {
	settled := make(chan struct{})
	addr := scriptedServer(t, []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 1}}, func(u *scripted) {
		for {
			f, err := u.fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && s.IsAck() {
				close(settled)
			}
		}
	})
	c := dial(t, addr, Config{})
	// The client acknowledges the SETTINGS after applying them.
	<-settled
	if !c.Reserve() {
		t.Fatal("no first slot")
	}
	if c.Reserve() {
		t.Fatal("a second slot beyond the peer's limit of 1")
	}
	c.Unreserve()
	if !c.Reserve() {
		t.Fatal("no slot once the first was returned")
	}
}

// TestCancel: a stream's context ending, or Cancel, resets it, and the reader gets the
// reason.
func TestCancel(t *testing.T) {
	resets := make(chan http2.ErrCode, 2)
	addr := scriptedServer(t, nil, func(u *scripted) { u.drain(resets) })
	c := dial(t, addr, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	c.Reserve()
	s, err := c.Open(ctx, &Request{Method: "GET", Scheme: "http", Authority: "a", Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.AwaitHead(); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want context.Canceled", err)
	}
	s.Close()
	s = get(t, c)
	go s.Cancel()
	if err := s.AwaitHead(); !errors.Is(err, ErrCanceled) {
		t.Errorf("error %v; want ErrCanceled", err)
	}
	s.Close()
	for range 2 {
		if code := <-resets; code != http2.ErrCodeCancel {
			t.Errorf("reset %v; want CANCEL", code)
		}
	}
}
