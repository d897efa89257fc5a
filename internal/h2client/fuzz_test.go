package h2client

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzResponse feeds an upstream's bytes (after its SETTINGS) to a connection with one GET and
// one POST stream open: whatever arrives, nothing panics, and both streams end once the
// upstream closes the connection.
func FuzzResponse(f *testing.F) {
	for _, seed := range responseSeeds() {
		f.Add(seed)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	f.Fuzz(func(t *testing.T, input []byte) {
		served := make(chan struct{})
		go func() {
			defer close(served)
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(nc, make([]byte, len(http2.ClientPreface))); err != nil {
				return
			}
			http2.NewFramer(nc, nil).WriteSettings()
			nc.Write(input)
			nc.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, nc) // until the client closes
		}()
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(nc, Config{StreamWindow: 1 << 10, MaxHeaderBytes: 1 << 10})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var streams []*Stream
		for _, r := range []*Request{
			{Method: "GET", Scheme: "http", Authority: "a", Path: "/"},
			{Method: "POST", Scheme: "http", Authority: "a", Path: "/", Body: bytes.NewReader(make([]byte, 3000)), ContentLength: 3000},
		} {
			c.Reserve()
			if s, err := c.Open(ctx, r); err == nil {
				streams = append(streams, s)
			}
		}
		for _, s := range streams {
			if s.AwaitHead() == nil {
				io.Copy(io.Discard, s)
				s.RawTrailer()
			}
			s.Close()
		}
		if ctx.Err() != nil {
			t.Fatal("a stream did not end when the upstream closed the connection")
		}
		c.Close()
		<-served
	})
}

// responseSeeds are upstream byte streams for streams 1 and 3: answers, trailers, resets,
// GOAWAY, window updates, and frames where they do not belong.
func responseSeeds() [][]byte {
	var seeds [][]byte
	seed := func(write func(fr *http2.Framer, block func(kv ...string) []byte)) {
		var out, hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		block := func(kv ...string) []byte {
			hb.Reset()
			for i := 0; i < len(kv); i += 2 {
				enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return append([]byte(nil), hb.Bytes()...)
		}
		write(http2.NewFramer(&out, nil), block)
		seeds = append(seeds, out.Bytes())
	}
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) {
		fr.WriteSettingsAck()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":status", "200", "content-length", "2"), EndHeaders: true})
		fr.WriteData(1, true, []byte("ok"))
		fr.WriteWindowUpdate(0, 1<<20)
		fr.WriteWindowUpdate(3, 1<<20)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(":status", "100"), EndHeaders: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(":status", "200"), EndHeaders: true})
		fr.WriteData(3, false, []byte("body"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block("grpc-status", "0"), EndHeaders: true, EndStream: true})
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) {
		b := block(":status", "204", "x-a", "1")
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:2]})
		fr.WriteContinuation(1, true, b[2:])
		fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
		fr.WritePing(false, [8]byte{1})
		fr.WriteGoAway(1, http2.ErrCodeNo, []byte("bye"))
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14})
		fr.WriteData(1, false, []byte("early"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block(":status", "200"), EndHeaders: true})
		fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: block(":path", "/"), EndHeaders: true})
	})
	return seeds
}
