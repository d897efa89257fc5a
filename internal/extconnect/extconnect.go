// Package extconnect turns on RFC 8441 extended CONNECT (WebSockets over HTTP/2) in
// golang.org/x/net/http2's server for the whole process, which Envoy's
// http2_protocol_options.allow_connect needs.
//
// x/net/http2 reads GODEBUG once, in its own init, and serves extended CONNECT (advertising
// SETTINGS_ENABLE_CONNECT_PROTOCOL) only when it lists http2xconnect=1 (golang/go#71128). Go
// initialises the packages that are ready in import-path order (the Go specification, since
// Go 1.21), so this package, which needs only os and strings, runs its init before
// golang.org/x/net/http2's in any program that imports it. An http2xconnect setting the
// operator gave is kept as it is. The connection manager decides per listener what clients
// see (httpproxy hides the setting from listeners without allow_connect).
//
// Concurrency: the only state is the process environment, written once during init.
package extconnect

import (
	"os"
	"strings"
)

const (
	godebug = "GODEBUG"
	setting = "http2xconnect="
)

func init() {
	v := os.Getenv(godebug)
	if strings.Contains(v, setting) {
		return
	}
	if v != "" {
		v += ","
	}
	os.Setenv(godebug, v+setting+"1")
}

// Enabled reports whether x/net/http2's server serves extended CONNECT in this process
// (false when the operator set http2xconnect=0).
func Enabled() bool {
	for _, kv := range strings.Split(os.Getenv(godebug), ",") {
		if strings.TrimSpace(kv) == setting+"1" {
			return true
		}
	}
	return false
}
