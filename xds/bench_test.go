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
//	endpoints: the clusters stay, every one of the 10,000 assignments changes (EDS only).
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
			cp.Stop()
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

func BenchmarkEDS10k(b *testing.B) {
	cp := newControlPlane(b, true)
	p := startProxy(b, adsResources(corev3.ApiConfigSource_GRPC), withDial(cp))
	applied := benchHook(p)
	pushBench(b, cp, p, applied, 0)
	clusters := make([]types.Resource, benchClusters)
	for j := range benchClusters {
		clusters[j] = edsCluster(fmt.Sprintf("c0-%d", j), "", adsSource())
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		endpoints := make([]types.Resource, benchClusters)
		for j := range benchClusters {
			endpoints[j] = assignment(fmt.Sprintf("c0-%d", j), fmt.Sprintf("10.%d.%d.%d:81", (i+1)%200, j/250, j%250))
		}
		cp.set(fmt.Sprint("e", i), clusters, endpoints)
		first, last := fmt.Sprintf("10.%d.0.0:81", (i+1)%200), fmt.Sprintf("c0-%d", benchClusters-1)
		want := fmt.Sprintf("10.%d.%d.%d:81", (i+1)%200, (benchClusters-1)/250, (benchClusters-1)%250)
		p.waitFor("every assignment applied", func() bool {
			return p.hasHosts("c0-0", first)() && p.hasHosts(last, want)()
		})
	}
}

// benchHook reports each accepted CDS update's apply time.
func benchHook(p *proxy) <-chan time.Duration {
	p.timeout = 5 * time.Minute
	applied := make(chan time.Duration, 16)
	p.c.testHook = func(typeURL, _ string, err error) {
		if typeURL == resource.ClusterType && err == nil {
			applied <- p.d.LastCDSDuration()
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
