package configdump_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/legateproxy/legate/admin/configdump"
)

// BenchmarkRender renders a dump of 1000 TLS clusters, each redacted.
func BenchmarkRender(b *testing.B) {
	d := &adminv3.ClustersConfigDump{}
	for i := range 1000 {
		c := tlsCluster(b, inlineString("KEY"))
		c.Name = fmt.Sprintf("cluster_%04d", i)
		c.ConnectTimeout = durationpb.New(time.Second)
		d.DynamicActiveClusters = append(d.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{
			VersionInfo: "v1", Cluster: mustAny(b, c), LastUpdated: updated,
		})
	}
	r := configdump.NewRegistry()
	add(b, r, "clusters", func(func(string) bool) proto.Message { return d })
	for _, req := range []configdump.Request{{}, {Mask: "dynamic_active_clusters"}, {Resource: "dynamic_active_clusters", Mask: "cluster.name"}} {
		b.Run(fmt.Sprintf("%+v", req), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if status, _, err := r.Render(io.Discard, req); status != http.StatusOK {
					b.Fatalf("Render() = %d, %v", status, err)
				}
			}
		})
	}
}
