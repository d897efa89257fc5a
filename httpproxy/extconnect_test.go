package httpproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/config"
)

// h2Framer opens an h2c connection to addr, closed when the test ends, and sends the
// client preface and an empty SETTINGS frame.
func h2Framer(t *testing.T, addr string) *http2.Framer {
	t.Helper()
	nc := dialProxy(t, addr)
	io.WriteString(nc, http2.ClientPreface)
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr
}

// serverSettings opens an h2c connection to addr and returns the server's first SETTINGS.
func serverSettings(t *testing.T, addr string) map[http2.SettingID]uint32 {
	t.Helper()
	fr := h2Framer(t, addr)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			got := map[http2.SettingID]uint32{}
			sf.ForeachSetting(func(s http2.Setting) error { got[s.ID] = s.Val; return nil })
			return got
		}
	}
}

// TestExtendedConnectSetting checks that only a listener with allow_connect offers extended
// CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL = 1), as Envoy's codec does; the other settings
// are untouched.
func TestExtendedConnectSetting(t *testing.T) {
	for _, allow := range []bool{true, false} {
		hcm := upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]")
		if allow {
			hcm += "http2_protocol_options: {allow_connect: true}\n"
		}
		e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", "127.0.0.1:1")}, hcm: hcm})
		got := serverSettings(t, e.addr)
		if v, ok := got[http2.SettingEnableConnectProtocol]; ok != allow || (ok && v != 1) {
			t.Errorf("allow_connect %v: SETTINGS_ENABLE_CONNECT_PROTOCOL = %d (present %v); want present %v", allow, v, ok, allow)
		}
		if got[http2.SettingMaxConcurrentStreams] == 0 {
			t.Errorf("allow_connect %v: SETTINGS %v lack MAX_CONCURRENT_STREAMS", allow, got)
		}
	}
}

// wsFrame is a masked client WebSocket frame (RFC 6455 §5.2) with a short payload.
func wsFrame(opcode byte, payload []byte) []byte {
	mask := [4]byte{1, 2, 3, 4}
	f := []byte{0x80 | opcode, 0x80 | byte(len(payload)), mask[0], mask[1], mask[2], mask[3]}
	for i, c := range payload {
		f = append(f, c^mask[i%4])
	}
	return f
}

// readWSFrame reads one unmasked server frame with a short payload.
func readWSFrame(t *testing.T, r io.Reader) (opcode byte, payload []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatalf("reading a WebSocket frame: %v", err)
	}
	payload = make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatalf("reading a WebSocket frame's payload: %v", err)
	}
	return h[0] & 0x0f, payload
}

// TestExtendedConnectWebSocket opens a WebSocket over HTTP/2 (RFC 8441: CONNECT with
// :protocol websocket, x/net/http2's client) through a listener with allow_connect to an
// HTTP/1.1 WebSocket server (gorilla): Legate sends it as an HTTP/1.1 upgrade, answers the
// stream 200 when the server switches protocols, and frames cross both ways up to the close
// handshake, after which the stream ends.
func TestExtendedConnectWebSocket(t *testing.T) {
	upstream := wsEcho(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", upstream.Listener.Addr().String())},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]\nhttp2_protocol_options: {allow_connect: true}"),
	})
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{AllowHTTP: true}).NewClientConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodConnect, "http://"+e.addr+"/chat", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(":protocol", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==") // the HTTP/1.1 server wants one
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("extended CONNECT: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Upstream") != "ws" {
		t.Fatalf("extended CONNECT = %d %v; want 200 with the upstream's headers", resp.StatusCode, resp.Header)
	}
	if op, p := readWSFrame(t, resp.Body); op != 1 || string(p) != "hello" {
		t.Fatalf("first frame = %d %q; want text \"hello\"", op, p)
	}
	pw.Write(wsFrame(1, []byte("over h2")))
	if op, p := readWSFrame(t, resp.Body); op != 1 || string(p) != "over h2" {
		t.Fatalf("echo = %d %q; want text \"over h2\"", op, p)
	}
	pw.Write(wsFrame(8, []byte{0x03, 0xe8})) // close, 1000
	if op, p := readWSFrame(t, resp.Body); op != 8 || binary.BigEndian.Uint16(p) != 1000 {
		t.Fatalf("close answer = %d %x; want close 1000", op, p)
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after the close handshake read %q (%v); want the stream's end", rest, err)
	}
	pw.Close()
	if got := e.stat("http.ingress.downstream_cx_upgrades_total"); got != 1 {
		t.Errorf("downstream_cx_upgrades_total = %d; want 1", got)
	}
}

// TestExtendedConnectRefusedWithoutAllowConnect sends :protocol to a listener that did not
// offer it: the stream is reset and nothing reaches the upstream.
func TestExtendedConnectRefusedWithoutAllowConnect(t *testing.T) {
	rec := newHeaderRecorder(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", rec.Listener.Addr().String())},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]"),
	})
	fr := h2Framer(t, e.addr)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "CONNECT"}, {":protocol", "websocket"}, {":scheme", "http"}, {":path", "/chat"}, {":authority", "a"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for RST_STREAM: %v", err)
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 1 {
			break
		}
		if h, ok := f.(*http2.HeadersFrame); ok && h.StreamID == 1 {
			t.Fatal("got response HEADERS; want the stream reset")
		}
	}
	if got := e.stat("cluster.web.upstream_cx_total"); got != 0 {
		t.Errorf("upstream_cx_total = %d; want 0", got)
	}
}

// TestAllowConnectNeedsTheLibrary checks that allow_connect is refused, naming the reason,
// when the operator turned x/net/http2's extended CONNECT off.
func TestAllowConnectNeedsTheLibrary(t *testing.T) {
	cfg := &config.HTTPConnectionManager{StatPrefix: "ingress", HTTP2AllowConnect: true}
	if err := checkAllowConnect(cfg); err != nil {
		t.Fatalf("checkAllowConnect() = %v; want nil with extended CONNECT on", err)
	}
	t.Setenv("GODEBUG", "http2xconnect=0")
	err := checkAllowConnect(cfg)
	if err == nil || !strings.Contains(err.Error(), "http2_protocol_options.allow_connect = true") || !strings.Contains(err.Error(), "not implemented by Legate") {
		t.Errorf("checkAllowConnect() with http2xconnect=0 = %v; want the allow_connect refusal", err)
	}
}

// TestH2TunnelStalledClientReset checks that a CONNECT tunnel whose HTTP/2 client stops
// reading (a zero flow-control window) is reset when the connection manager's
// stream_idle_timeout passes, instead of holding the stream and its upstream connection
// forever.
func TestH2TunnelStalledClientReset(t *testing.T) {
	chatty := serveTCP(t, func(c net.Conn) {
		c.Write(bytes.Repeat([]byte("x"), 1000))
		io.Copy(io.Discard, c)
	})
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", chatty)},
		hcm:      upgradeHCM("", "stream_idle_timeout: 0.2s"),
	})
	nc := dialProxy(t, e.addr)
	io.WriteString(nc, http2.ClientPreface)
	fr := http2.NewFramer(nc, nc)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":method", Value: "CONNECT"})
	enc.WriteField(hpack.HeaderField{Name: ":authority", Value: "backend:80"})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for RST_STREAM: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			fr.WriteSettingsAck()
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 1 {
			break
		}
	}
	waitStat(t, e, "cluster.web.upstream_cx_destroy", 1)
	waitStat(t, e, "http.ingress.downstream_rq_idle_timeout", 1)
}
