package resource

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

func FuzzSourceFromProto(f *testing.F) {
	seed, _ := proto.Marshal(adsSource())
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		cs := &corev3.ConfigSource{}
		if proto.Unmarshal(data, cs) != nil {
			return
		}
		src, err := SourceFromProto(cs)
		if err == nil && !src.ADS && !src.Self && src.API == nil && src.Path == "" {
			t.Errorf("SourceFromProto(%v) = %+v; want a kind or an error", cs, src)
		}
	})
}

func FuzzParseResponseFile(f *testing.F) {
	f.Add("cds.yaml", "version_info: \"1\"\nresources: []\n")
	f.Add("cds.json", `{"version_info":"1"}`)
	f.Fuzz(func(t *testing.T, name, data string) {
		_, _ = ParseResponseFile(name, []byte(data))
	})
}
