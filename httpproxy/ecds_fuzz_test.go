package httpproxy

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/watch"
)

// FuzzDecodeExtensionConfig: an ECDS resource never panics the decoder, and one it accepts
// has a name and a typed_config.
func FuzzDecodeExtensionConfig(f *testing.F) {
	good, _ := proto.Marshal(&corev3.TypedExtensionConfig{Name: "hc", TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/x"}})
	f.Add(good)
	f.Add([]byte{0x0a, 0x02, 'h', 'c'})
	f.Fuzz(func(t *testing.T, data []byte) {
		name, tc, err := DecodeExtensionConfig(&anypb.Any{TypeUrl: watch.ExtensionConfigType, Value: data})
		if err == nil && (name == "" || tc.GetTypedConfig() == nil || tc.GetName() != name) {
			t.Errorf("DecodeExtensionConfig succeeded with %q, %v", name, tc)
		}
	})
}
