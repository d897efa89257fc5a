package pool

import (
	"bufio"
	"bytes"
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHTTP2UnprocessedRetried: a request the upstream did not process is sent again, and the
// client sees the answer to the second attempt: on a new connection after a GOAWAY whose last
// stream id is below it, on the same one after RST_STREAM REFUSED_STREAM.
func TestHTTP2UnprocessedRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse func(fr *http2.Framer, id uint32)
		conns  int32
	}{
		{"GOAWAY", func(fr *http2.Framer, id uint32) { fr.WriteGoAway(0, http2.ErrCodeNo, nil) }, 2},
		{"REFUSED_STREAM", func(fr *http2.Framer, id uint32) { fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			var conns atomic.Int32
			var refused atomic.Bool
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					conns.Add(1)
					go serveScripted(c, func(fr *http2.Framer, id uint32) {
						if refused.CompareAndSwap(false, true) {
							tc.refuse(fr, id)
							return
						}
						var block bytes.Buffer
						hpack.NewEncoder(&block).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
						fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: true})
					})
				}
			}()
			cm, store := newClusterManager(t, staticCluster(typedOptions("explicit_http_config: {http2_protocol_options: {}}"), ln.Addr().String()))
			m := newManager(t, cm, store, nil)
			if code, _ := get(t, m, onlyHost(t, m), "/"); code != 200 {
				t.Fatalf("status %d; want 200", code)
			}
			if n := conns.Load(); n != tc.conns {
				t.Errorf("upstream connections = %d; want %d", n, tc.conns)
			}
		})
	}
}

// serveScripted speaks HTTP/2 on c: it answers SETTINGS and PING and hands each request's
// stream id to answer. What it writes is flushed once it has read all that has arrived.
func serveScripted(c net.Conn, answer func(fr *http2.Framer, id uint32)) {
	defer c.Close()
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	if _, err := br.Discard(len(http2.ClientPreface)); err != nil {
		return
	}
	fr := http2.NewFramer(bw, br)
	fr.WriteSettings()
	for {
		if br.Buffered() == 0 && bw.Flush() != nil {
			return
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				fr.WritePing(true, f.Data)
			}
		case *http2.HeadersFrame:
			answer(fr, f.StreamID)
		}
	}
}
