// Package echo is Envoy's envoy.filters.network.echo network filter
// (extensions.filters.network.echo.v3.Echo, which has no fields): a terminal filter that
// writes back every byte the client sends, until the client closes. It has no stats.
package echo

import (
	"io"

	echov3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/echo/v3"

	"github.com/legateproxy/legate/listener"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.echo"

// TypeURL is its typed_config type.
var TypeURL = "type.googleapis.com/" + string((&echov3.Echo{}).ProtoReflect().Descriptor().FullName())

// Register adds the filter to r.
func Register(r *listener.Registry) error {
	return r.Register(Name, func(*listener.ChainContext) (listener.FilterChainHandler, error) {
		return listener.HandlerFunc(serve), nil
	}, TypeURL)
}

// serve echoes c until its client closes, then closes it.
func serve(c *listener.Conn) {
	defer c.Close()
	io.Copy(c, c)
}
