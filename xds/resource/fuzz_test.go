package resource

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/config"
)

func FuzzDecodeCluster(f *testing.F) {
	seed, _ := proto.Marshal(edsCluster("web", adsSource()))
	f.Add(seed)
	f.Add([]byte{0x0a, 0x01, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := DecodeCluster(&anypb.Any{TypeUrl: ClusterType, Value: data}, config.Limits{})
		if err == nil && (rc == nil || rc.Config == nil || rc.Name != rc.Config.Name) {
			t.Errorf("DecodeCluster succeeded with %+v", rc)
		}
		_ = ClusterName(&anypb.Any{TypeUrl: ClusterType, Value: data})
	})
}

func FuzzDecodeEndpoints(f *testing.F) {
	f.Add([]byte{0x0a, 0x03, 's', 'v', 'c'})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEndpoints(&anypb.Any{TypeUrl: EndpointType, Value: data})
		if err == nil && (e == nil || e.Name == "") {
			t.Errorf("DecodeEndpoints succeeded with %+v", e)
		}
	})
}

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
