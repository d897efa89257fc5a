package xds

import (
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/legateproxy/legate/xds/resource"
)

const benchClusters = 10000

// BenchmarkCDS10k pushes 10,000 EDS clusters and their 10,000 assignments over ADS from
// go-control-plane's server on 127.0.0.1. cds-ms is the time the client spends applying the
// CDS response (decode, validate, AddOrUpdate/Remove, EDS subscriptions); warm-ms is the time
// from the push until every cluster is active with its endpoints.
//
//	add:     a fresh proxy receives 10,000 new clusters.
//	replace: the whole set is replaced by 10,000 clusters of new names (10,000 removals and
//	         10,000 additions).
func BenchmarkCDS10k(b *testing.B) {
	b.Run("add", func(b *testing.B) {
		var cdsTotal, warmTotal time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			cp := newControlPlane(b, true)
			p := startProxy(b, adsResources(corev3.ApiConfigSource_GRPC), withDial(cp))
			applied := benchHook(p)
			b.StartTimer()
			cds, warm := pushBench(b, cp, p, applied, 0)
			cdsTotal += cds
			warmTotal += warm
			b.StopTimer()
			p.stop()
			cp.stop()
		}
		b.ReportMetric(float64(cdsTotal.Milliseconds())/float64(b.N), "cds-ms")
		b.ReportMetric(float64(warmTotal.Milliseconds())/float64(b.N), "warm-ms")
	})
	b.Run("replace", func(b *testing.B) {
		cp := newControlPlane(b, true)
		p := startProxy(b, adsResources(corev3.ApiConfigSource_GRPC), withDial(cp))
		applied := benchHook(p)
		pushBench(b, cp, p, applied, 0)
		var cdsTotal, warmTotal time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cds, warm := pushBench(b, cp, p, applied, i+1)
			cdsTotal += cds
			warmTotal += warm
		}
		b.ReportMetric(float64(cdsTotal.Milliseconds())/float64(b.N), "cds-ms")
		b.ReportMetric(float64(warmTotal.Milliseconds())/float64(b.N), "warm-ms")
	})
}

// benchHook reports each accepted CDS update's apply time.
func benchHook(p *proxy) <-chan time.Duration {
	p.timeout = 5 * time.Minute
	applied := make(chan time.Duration, 16)
	p.c.testHook = func(typeURL, _ string, err error) {
		if typeURL == resource.ClusterType && err == nil {
			applied <- p.c.lastCDSDuration()
		}
		select {
		case p.events <- struct{}{}:
		default:
		}
	}
	return applied
}

// pushBench pushes generation gen of the cluster set and waits until all are warm.
func pushBench(b *testing.B, cp *controlPlane, p *proxy, applied <-chan time.Duration, gen int) (cds, warm time.Duration) {
	clusters := make([]types.Resource, benchClusters)
	endpoints := make([]types.Resource, benchClusters)
	for j := range benchClusters {
		name := fmt.Sprintf("c%d-%d", gen, j)
		clusters[j] = edsCluster(name, "", adsSource())
		endpoints[j] = assignment(name, fmt.Sprintf("10.%d.%d.%d:80", gen%200, j/250, j%250))
	}
	start := time.Now()
	cp.set(fmt.Sprint("v", gen), clusters, endpoints)
	select {
	case cds = <-applied:
	case <-time.After(5 * time.Minute):
		b.Fatal("no CDS update within 5 minutes")
	}
	last := fmt.Sprintf("c%d-%d", gen, benchClusters-1)
	p.waitFor("every cluster warm", func() bool {
		return p.cm.Get(last) != nil && len(p.cm.Snapshot()) == benchClusters && len(p.cm.Warming()) == 0
	})
	return cds, time.Since(start)
}
