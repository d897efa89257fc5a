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

	"github.com/legateproxy/legate/listener"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.direct_response"

func build(ctx *listener.ChainContext) (listener.FilterChainHandler, error) {
	f := ctx.Chain.Filters[len(ctx.Chain.Filters)-1]
	pb := &drv3.Config{}
	if f.TypedConfig != nil {
		if err := f.TypedConfig.UnmarshalTo(pb); err != nil {
			return nil, fmt.Errorf("%s: %v", Name, err)
		}
	}
	body, err := response(pb)
	if err != nil {
		return nil, err
	}
	return listener.HandlerFunc(func(c *listener.Conn) {
		defer c.Close()
		if len(body) > 0 {
			c.Write(body)
		}
	}), nil
}

func response(pb *drv3.Config) ([]byte, error) {
	r := pb.GetResponse()
	switch {
	case r == nil:
		return nil, nil
	case r.GetFilename() != "":
		b, err := os.ReadFile(r.GetFilename())
		if err != nil {
			return nil, fmt.Errorf("%s: response.filename: %v", Name, err)
		}
		return b, nil
	case r.GetEnvironmentVariable() != "":
		return nil, fmt.Errorf("%s: response.environment_variable: not implemented by Legate", Name)
	case r.GetInlineBytes() != nil:
		return r.GetInlineBytes(), nil
	}
	return []byte(r.GetInlineString()), nil
}
