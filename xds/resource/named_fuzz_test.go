package resource

import (
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzNamedResourceName reads bytes as a resource of each named type: it never panics.
func FuzzNamedResourceName(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 'r'})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, u := range []string{RouteType, SecretType, RuntimeType, ExtensionConfigType} {
			_ = NamedResourceName(&anypb.Any{TypeUrl: u, Value: data})
		}
	})
}
