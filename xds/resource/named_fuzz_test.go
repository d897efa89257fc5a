package resource

import (
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/route"
)

// FuzzDecodeNamed decodes bytes as an RDS resource: a success always
// carries the resource's non-empty name.
func FuzzDecodeNamed(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 'r'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if rc, err := DecodeRouteConfig(&anypb.Any{TypeUrl: RouteType, Value: data}, route.Options{}); err == nil && rc.GetName() == "" {
			t.Errorf("DecodeRouteConfig succeeded without a name: %v", rc)
		}
		for _, u := range []string{RouteType, SecretType, RuntimeType} {
			_ = NamedResourceName(&anypb.Any{TypeUrl: u, Value: data})
		}
	})
}
