package httpproxy

import (
	"fmt"
	"net/http"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/extconnect"
)

// HTTP/2 extended CONNECT (RFC 8441) and http2_protocol_options.allow_connect.
//
// A listener whose connection manager has allow_connect behaves as Envoy's: it advertises
// SETTINGS_ENABLE_CONNECT_PROTOCOL and its extended CONNECTs are upgrades (upgrade.go). On
// any other listener the setting is not sent, so that clients (browsers opening WebSockets)
// keep to HTTP/1.1 as they do with Envoy, and a client that sends :protocol anyway has its
// stream reset. allow_connect is refused when the process cannot open extended CONNECT
// streams upstream (x/net/http2's Transport, which package extconnect turns on).

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
