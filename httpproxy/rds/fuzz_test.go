package rds

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/xds/watch"
)

// FuzzDecodeRouteConfig decodes bytes as an RDS resource: a success always carries the
// resource's non-empty name.
func FuzzDecodeRouteConfig(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 'r'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if rc, err := DecodeRouteConfig(&anypb.Any{TypeUrl: watch.RouteType, Value: data}, route.Options{}); err == nil && rc.GetName() == "" {
			t.Errorf("DecodeRouteConfig succeeded without a name: %v", rc)
		}
	})
}

// FuzzDecodeScopedRoute decodes bytes as an SRDS resource: a success has a name, a route
// configuration name and a key of string_key fragments.
func FuzzDecodeScopedRoute(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 's', 0x12, 0x01, 'r', 0x1a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 'k'})
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := DecodeScopedRoute(&anypb.Any{TypeUrl: watch.ScopedRouteType, Value: data})
		if err != nil {
			return
		}
		if sc.GetName() == "" || sc.GetRouteConfigurationName() == "" {
			t.Errorf("DecodeScopedRoute accepted %v without a name or route configuration name", sc)
		}
		if _, err := ScopeKey("", sc); err != nil {
			t.Errorf("DecodeScopedRoute accepted a key ScopeKey refuses: %v", err)
		}
	})
}

// FuzzDecodeVirtualHost decodes bytes as a VHDS resource: a success is named
// "<route configuration>/<host>".
func FuzzDecodeVirtualHost(f *testing.F) {
	f.Add([]byte{0x0a, 0x04, 'r', '/', 'h', 'x', 0x12, 0x01, '*'})
	f.Fuzz(func(t *testing.T, data []byte) {
		vh, err := DecodeVirtualHost(&anypb.Any{TypeUrl: watch.VirtualHostType, Value: data})
		if err != nil {
			return
		}
		if rc, _, ok := strings.Cut(vh.GetName(), "/"); !ok || rc == "" {
			t.Errorf("DecodeVirtualHost accepted the name %q", vh.GetName())
		}
	})
}
