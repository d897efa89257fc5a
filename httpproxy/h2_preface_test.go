package httpproxy

import (
	"errors"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"
)

// TestH2InvalidPreface checks that a connection whose HTTP/2 client preface is wrong gets a
// GOAWAY (PROTOCOL_ERROR) and is closed cleanly (RFC 9113 §3.4), not reset before the client
// reads the answer, on a listener that speaks only HTTP/2 and on one that detects it.
func TestH2InvalidPreface(t *testing.T) {
	up := h2cUpstream(t, "up")
	for _, tc := range []struct {
		name, codec, preface string
	}{
		{name: "http2 codec", codec: "codec_type: HTTP2\n", preface: "INVALID CONNECTION PREFACE\r\n\r\n"},
		{name: "auto codec", codec: "", preface: "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
				hcm:      tc.codec + simpleHCM("web", ""),
			})
			c := dialRaw(t, e.addr).c
			if _, err := io.WriteString(c, tc.preface); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(nil, c)
			var goAway *http2.GoAwayFrame
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					var ne net.Error
					if !errors.Is(err, io.EOF) || errors.As(err, &ne) {
						t.Fatalf("after GOAWAY %v: %v; want the connection closed", goAway, err)
					}
					break
				}
				if g, ok := f.(*http2.GoAwayFrame); ok {
					goAway = g
				}
			}
			if goAway == nil || goAway.ErrCode != http2.ErrCodeProtocol {
				t.Errorf("GOAWAY %v; want one with PROTOCOL_ERROR", goAway)
			}
			waitStat(t, e, "http.ingress.downstream_cx_protocol_error", 1)
		})
	}
}
