package httpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2FuzzSeeds are frame sequences (after the preface) the fuzz target starts from: a request,
// a request with a body and trailers, and hostile shapes.
func h2FuzzSeeds() [][]byte {
	var seeds [][]byte
	add := func(build func(fr *http2.Framer)) {
		var b bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		fr.AllowIllegalWrites = true
		fr.WriteSettings()
		build(fr)
		seeds = append(seeds, b.Bytes())
	}
	add(func(fr *http2.Framer) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/"), EndHeaders: true, EndStream: true})
	})
	add(func(fr *http2.Framer) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/"), EndHeaders: true})
		fr.WriteData(1, false, []byte("hello"))
		var tb bytes.Buffer
		hpack.NewEncoder(&tb).WriteField(hpack.HeaderField{Name: "x-t", Value: "v"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: tb.Bytes(), EndHeaders: true, EndStream: true})
	})
	add(func(fr *http2.Framer) { // rapid reset
		for id := uint32(1); id < 20; id += 2 {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: requestBlock("/"), EndHeaders: true})
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
	})
	add(func(fr *http2.Framer) { // window abuse, data after END_STREAM, CONTINUATION without HEADERS
		fr.WriteWindowUpdate(0, 1<<31-1)
		fr.WriteWindowUpdate(0, 1<<31-1)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: requestBlock("/"), EndHeaders: true, EndStream: true})
		fr.WriteData(3, true, []byte("late"))
		fr.WriteContinuation(5, true, []byte{0x82})
	})
	add(func(fr *http2.Framer) { // a SETTINGS and PING flood
		for range 50 {
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			fr.WritePing(false, [8]byte{1})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/"), EndHeaders: true, EndStream: true})
	})
	return seeds
}

// FuzzH2Frames feeds arbitrary bytes after the client preface to the HTTP/2 server over a
// real socket: whatever they are, the server neither panics nor keeps the connection open
// after the client's side ends (it answers or closes within the deadline).
func FuzzH2Frames(f *testing.F) {
	for _, s := range h2FuzzSeeds() {
		f.Add(s)
	}
	up := rawUpstream(f)
	e := newEnv(f, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: simpleHCM("web", "")})
	f.Fuzz(func(t *testing.T, in []byte) {
		c := dialRaw(t, e.addr).c
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		c.Write(in)
		c.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, c); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server kept the connection open %v after the client's end", wait)
			}
		}
	})
}

// TestH2HostileFrames checks the server's answers to hostile frame sequences from a scripted
// client: each gets the error RFC 9113 names, and the server keeps serving other connections.
func TestH2HostileFrames(t *testing.T) {
	up := rawUpstream(t)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: simpleHCM("web", "")})
	tests := []struct {
		name string
		send func(fr *http2.Framer)
		want string // "goaway:CODE" or "rst:CODE"
	}{
		{"window overflow on the connection", func(fr *http2.Framer) {
			fr.WriteWindowUpdate(0, 1<<31-1)
		}, "goaway:" + http2.ErrCodeFlowControl.String()},
		{"DATA after END_STREAM", func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/"), EndHeaders: true, EndStream: true})
			fr.WriteData(1, true, []byte("late"))
		}, "rst:" + http2.ErrCodeStreamClosed.String()},
		{"CONTINUATION without HEADERS", func(fr *http2.Framer) {
			fr.WriteContinuation(1, true, []byte{0x82})
		}, "goaway:" + http2.ErrCodeProtocol.String()},
		{"stream window overflow", func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/"), EndHeaders: true})
			fr.WriteWindowUpdate(1, 1<<31-1)
		}, "rst:" + http2.ErrCodeFlowControl.String()},
		{"PUSH_PROMISE from the client", func(fr *http2.Framer) {
			fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: requestBlock("/"), EndHeaders: true})
		}, "goaway:" + http2.ErrCodeProtocol.String()},
		{"request on an even stream", func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: requestBlock("/"), EndHeaders: true, EndStream: true})
		}, "goaway:" + http2.ErrCodeProtocol.String()},
		{"connection-specific field", func(fr *http2.Framer) {
			var b bytes.Buffer
			b.Write(requestBlock("/"))
			hpack.NewEncoder(&b).WriteField(hpack.HeaderField{Name: "connection", Value: "close"})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b.Bytes(), EndHeaders: true, EndStream: true})
		}, "rst:" + http2.ErrCodeProtocol.String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, e.addr).c
			defer c.Close()
			c.SetDeadline(time.Now().Add(wait))
			// One write: every frame is read before any handler could answer.
			bw := bufio.NewWriter(c)
			bw.WriteString(http2.ClientPreface)
			fr := http2.NewFramer(bw, c)
			fr.AllowIllegalWrites = true
			fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			fr.WriteSettings()
			tc.send(fr)
			if err := bw.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := firstError(t, fr); got != tc.want {
				t.Errorf("answer %q; want %q", got, tc.want)
			}
		})
	}
	resp, err := h2cClient(t).Get("http://" + e.addr + "/after")
	if err != nil {
		t.Fatalf("a request after the hostile clients: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a request after the hostile clients: status %d; want 200", resp.StatusCode)
	}
}

// firstError reads frames until a GOAWAY or RST_STREAM and names it.
func firstError(t *testing.T, fr *http2.Framer) string {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "closed: " + err.Error()
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return "goaway:" + f.ErrCode.String()
		case *http2.RSTStreamFrame:
			return "rst:" + f.ErrCode.String()
		}
	}
}
