package runtime

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/xds/watch"
)

// rtdsType is RTDS's resource type for the xDS client's watch API: a Runtime resource is the
// values of the rtds_layer its name selects.
type rtdsType struct{}

func (rtdsType) TypeURL() string { return watch.RuntimeType }
func (rtdsType) Short() string   { return "RTDS" }

func (rtdsType) Decode(a *anypb.Any) (string, any, error) {
	name, layer, err := DecodeRTDS(a)
	if err != nil {
		return name, nil, err
	}
	return name, layer, nil
}

// StatPrefix puts every RTDS subscription's stats in the runtime. scope, as Envoy does.
func (rtdsType) StatPrefix(string) string { return "runtime." }

func (rtdsType) InitTarget(name string) string { return "RTDS " + name }

// DecodeRTDS decodes and validates an RTDS resource: its name and its layer's values (as
// structpb.Struct.AsMap returns them; empty without a layer).
func DecodeRTDS(a *anypb.Any) (string, map[string]any, error) {
	pb := &runtimev3.Runtime{}
	name, err := watch.DecodeNamed(a, watch.RuntimeType, "runtime", pb, pb.GetName)
	if err != nil {
		return name, nil, err
	}
	if pb.GetLayer() == nil {
		return name, map[string]any{}, nil
	}
	return name, pb.GetLayer().AsMap(), nil
}

// WatchRTDS subscribes each of the bootstrap's rtds_layer entries through the xDS client c:
// every accepted Runtime resource replaces the layer's values (set, Runtime.SetRTDSLayer), a
// removal or a first fetch that ends without one clears them. The server calls it before the
// client runs, so that initialization waits for each layer ("RTDS <name>"). A layer set
// refuses is logged on log (nil discards); the resource stays ACKed.
func WatchRTDS(c watch.Client, layers []*bootstrapv3.RuntimeLayer_RtdsLayer, set func(name string, layer map[string]any) error, log *logging.Logger) error {
	for _, l := range layers {
		name := l.GetName()
		_, err := c.Watch(rtdsType{}, l.GetRtdsConfig(), name, watch.Func(func(v any) {
			layer, _ := v.(map[string]any)
			if err := set(name, layer); err != nil {
				log.Errorf("xds: RTDS %q: %v", name, err)
			}
		}))
		if err != nil {
			return fmt.Errorf("layered_runtime rtds_layer %q: rtds_config.%w", name, err)
		}
	}
	return nil
}
