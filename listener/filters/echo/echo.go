// Package echo is Envoy's envoy.filters.network.echo network filter
// (extensions.filters.network.echo.v3.Echo, which has no fields): a terminal filter that
// writes back every byte the client sends, until the client closes. It has no stats.
package echo

import (
	"io"

	"github.com/legateproxy/legate/listener"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.echo"

// serve echoes c until its client closes, then closes it.
func serve(c *listener.Conn) {
	defer c.Close()
	io.Copy(c, c)
}
