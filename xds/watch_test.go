package xds

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/resource"
)

// routeWatchType is an owner's type whose URL the client still handles itself.
type routeWatchType struct{}

func (routeWatchType) TypeURL() string                        { return resource.RouteType }
func (routeWatchType) Short() string                          { return "RDS" }
func (routeWatchType) Decode(*anypb.Any) (string, any, error) { return "", nil, nil }
func (routeWatchType) StatPrefix(string) string               { return "x." }
func (routeWatchType) InitTarget(string) string               { return "" }

// TestWatchRefusesClientTypes: a type the client subscribes to itself (RDS) cannot be watched,
// since two handlers of one type would share its streams.
func TestWatchRefusesClientTypes(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))
	_, err := p.c.Watch(routeWatchType{}, adsSource(), "r", nil)
	if err == nil || !strings.Contains(err.Error(), "RouteConfiguration resources are handled by the client") {
		t.Fatalf("Watch = %v; want the refusal", err)
	}
}
