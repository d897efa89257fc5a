package server

import (
	"strings"

	"github.com/legateproxy/legate/hotrestart"
)

// Build facts, set with -ldflags "-X github.com/legateproxy/legate/server.revision=…".
var (
	revision = "0000000000000000000000000000000000000000"
	status   = "Clean"
)

// APIVersion is the Envoy release whose configuration and admin surface
// Legate implements; control planes gate features on it.
const (
	APIMajor, APIMinor, APIPatch = 1, 37, 0
	versionLabel                 = "legate"
	sslLibrary                   = "GoCryptoTLS"
)

// VersionString is /server_info's version and `--version`'s body, in Envoy's
// layout: <sha>/<x.y.z-label>/<Clean|Modified>/RELEASE/<ssl library>.
func VersionString() string {
	return strings.Join([]string{revision, "1.37.0-" + versionLabel, status, "RELEASE", sslLibrary}, "/")
}

// HotRestartVersion is the hot-restart compatibility string,
// "legate.<protocol>": Legate's protocol is its own (package hotrestart;
// Envoy's shared-memory layout does not apply), so it never claims Envoy's
// "11.104".
const HotRestartVersion = hotrestart.Version
