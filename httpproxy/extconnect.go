package httpproxy

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/http"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/extconnect"
)

// HTTP/2 extended CONNECT (RFC 8441) and http2_protocol_options.allow_connect.
//
// x/net/http2 serves extended CONNECT for the whole process or not at all (package
// extconnect turns it on). A listener whose connection manager has allow_connect behaves as
// Envoy's: it advertises SETTINGS_ENABLE_CONNECT_PROTOCOL and its extended CONNECTs are
// upgrades (upgrade.go). On any other listener the setting is taken out of the server's
// first SETTINGS frame, so that clients (browsers opening WebSockets) keep to HTTP/1.1 as they
// do with Envoy, and a client that sends :protocol anyway has its stream reset.

const (
	h2FrameSettings        = 0x4
	h2FlagAck              = 0x1
	h2SettingsEntryLen     = 6
	h2SettingEnableConnect = 0x8
)

// checkAllowConnect refuses allow_connect when this process cannot serve extended CONNECT
// (the operator set GODEBUG=http2xconnect=0).
func checkAllowConnect(cfg *config.HTTPConnectionManager) error {
	if cfg.HTTP2AllowConnect && !extconnect.Enabled() {
		return fmt.Errorf("http_connection_manager %q: http2_protocol_options.allow_connect = true: needs golang.org/x/net/http2's extended CONNECT, which GODEBUG=http2xconnect=0 turns off; not implemented by Legate with it", cfg.StatPrefix)
	}
	return nil
}

// refusesExtendedConnect reports an extended CONNECT on a listener without allow_connect.
func (c *h2conn) refusesExtendedConnect(r *http.Request) bool {
	return r.Method == http.MethodConnect && len(r.Header[":protocol"]) > 0 && !c.h.cfg.HTTP2AllowConnect
}

// hideConnectSetting wraps an HTTP/2 server connection of a listener without allow_connect
// so that the server's first SETTINGS frame does not offer extended CONNECT.
func (h *Handler) hideConnectSetting(c net.Conn) net.Conn {
	if h.cfg.HTTP2AllowConnect || !extconnect.Enabled() {
		return c
	}
	return &settingsFilter{Conn: c}
}

// settingsFilter rewrites the first write of an HTTP/2 server, which starts with its SETTINGS
// frame (RFC 9113 §3.4). Writes come one at a time (h2wire's lock).
type settingsFilter struct {
	net.Conn
	done bool
}

func (f *settingsFilter) Write(p []byte) (int, error) {
	if f.done {
		return f.Conn.Write(p)
	}
	f.done = true
	q := withoutConnectSetting(p)
	n, err := f.Conn.Write(q)
	if err != nil {
		return max(n-(len(q)-len(p)), 0), err
	}
	return len(p), nil
}

// withoutConnectSetting returns p with SETTINGS_ENABLE_CONNECT_PROTOCOL removed from the
// SETTINGS frame p starts with; p itself when it does not start with a whole SETTINGS frame
// that has the entry.
func withoutConnectSetting(p []byte) []byte {
	if len(p) < h2FrameHeaderLen || p[3] != h2FrameSettings || p[4]&h2FlagAck != 0 {
		return p
	}
	length := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	if length%h2SettingsEntryLen != 0 || len(p) < h2FrameHeaderLen+length {
		return p
	}
	payload := p[h2FrameHeaderLen : h2FrameHeaderLen+length]
	out := make([]byte, h2FrameHeaderLen, len(p))
	copy(out, p[:h2FrameHeaderLen])
	for i := 0; i < len(payload); i += h2SettingsEntryLen {
		if binary.BigEndian.Uint16(payload[i:]) != h2SettingEnableConnect {
			out = append(out, payload[i:i+h2SettingsEntryLen]...)
		}
	}
	kept := len(out) - h2FrameHeaderLen
	if kept == length {
		return p
	}
	out[0], out[1], out[2] = byte(kept>>16), byte(kept>>8), byte(kept)
	return append(out, p[h2FrameHeaderLen+length:]...)
}
