package xds

import (
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/resource"
)

var rtdsKind = &namedKind{
	typeURL: resource.RuntimeType,
	short:   "RTDS",
	decode: func(_ *Client, a *anypb.Any) (string, any, error) {
		name, layer, err := resource.DecodeRuntime(a)
		if err != nil {
			return name, nil, err
		}
		return name, layer, nil
	},
	// Envoy keeps every RTDS subscription's stats in the runtime. scope.
	statPrefix: func(string, string) string { return "runtime." },
	initTarget: func(name string) string { return "RTDS " + name },
}

// startRTDS subscribes to each configured rtds_layer: every accepted Runtime resource
// replaces the layer's values (Config.Runtime.SetRTDSLayer); a removal clears them.
func (c *Client) startRTDS() error {
	if c.cfg.Runtime == nil {
		return nil
	}
	for i, l := range c.cfg.RTDSLayers {
		src, err := resource.SourceFromProto(l.GetRtdsConfig())
		if err != nil {
			return fmt.Errorf("layered_runtime rtds_layer %q: rtds_config.%w", l.GetName(), err)
		}
		if src.Self {
			return fmt.Errorf("layered_runtime rtds_layer %q: rtds_config.self is not supported", l.GetName())
		}
		name := c.cfg.RTDSLayers[i].GetName()
		_, _, _, _, err = c.rtds.subscribe(src, name, "", func(_ uint64, v any) {
			layer, _ := v.(map[string]any)
			if err := c.cfg.Runtime.SetRTDSLayer(name, layer); err != nil {
				c.log.Errorf("xds: RTDS %q: %v", name, err)
			}
		})
		if err != nil {
			return fmt.Errorf("layered_runtime rtds_layer %q: %w", name, err)
		}
	}
	return nil
}
