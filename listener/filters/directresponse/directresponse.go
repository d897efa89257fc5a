// Package directresponse is Envoy's envoy.filters.network.direct_response network filter
// (extensions.filters.network.direct_response.v3.Config): a terminal filter that writes its
// response to each new connection and closes it, without reading. The response is a
// DataSource: inline_string, inline_bytes or filename (read when the chain is built);
// environment_variable is refused with "not implemented by Legate", and a missing response
// writes nothing. It has no stats.
package directresponse

import (
	"fmt"
	"os"

	drv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/direct_response/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/listener"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.direct_response"

// response is the filter's configuration as the configuration path converts it: the inline
// response, or the file to read it from.
type response struct {
	body     []byte
	filename string
}

// parse is the filter's config.NetworkFilterParser: a *response.
func parse(m proto.Message) (any, error) {
	r := m.(*drv3.Config).GetResponse()
	switch {
	case r == nil:
		return &response{}, nil
	case r.GetFilename() != "":
		return &response{filename: r.GetFilename()}, nil
	case r.GetEnvironmentVariable() != "":
		return nil, fmt.Errorf("%s: response.environment_variable: not implemented by Legate", Name)
	case r.GetInlineBytes() != nil:
		return &response{body: r.GetInlineBytes()}, nil
	}
	return &response{body: []byte(r.GetInlineString())}, nil
}

// build makes the handler, reading the response's file now.
func build(_ *listener.ChainContext, config any) (listener.FilterChainHandler, error) {
	r, err := listener.ConfigOf[*response](Name, config)
	if err != nil {
		return nil, err
	}
	body := r.body
	if r.filename != "" {
		if body, err = os.ReadFile(r.filename); err != nil {
			return nil, fmt.Errorf("%s: response.filename: %v", Name, err)
		}
	}
	return listener.HandlerFunc(func(c *listener.Conn) {
		defer c.Close()
		if len(body) > 0 {
			c.Write(body)
		}
	}), nil
}
