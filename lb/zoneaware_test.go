package lb_test

import (
	"fmt"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
	"github.com/legateproxy/legate/lb/roundrobin"
)

var zoneA, zoneB, zoneC = host.Locality{Zone: "a"}, host.Locality{Zone: "b"}, host.Locality{Zone: "c"}

// zonedSet builds a priority set with n[i] healthy hosts in zone a, b, c; this proxy is in a.
func zonedSet(t testing.TB, prefix string, n [3]int) *host.PrioritySet {
	t.Helper()
	return zonedSetHealth(t, prefix, n, func(zone, i int) host.HealthFlag { return 0 })
}

// zonedSetHealth is zonedSet with host i of zone index zone given the flags health returns.
func zonedSetHealth(t testing.TB, prefix string, n [3]int, health func(zone, i int) host.HealthFlag) *host.PrioritySet {
	t.Helper()
	local := zoneA
	return zonedBuild(t, prefix, n, health, host.SetConfig{LocalLocality: &local})
}

// zonedBuild builds the hosts of zonedSetHealth into a priority set with cfg.
func zonedBuild(t testing.TB, prefix string, n [3]int, health func(zone, i int) host.HealthFlag, cfg host.SetConfig) *host.PrioritySet {
	t.Helper()
	var hs []*host.Host
	for z, loc := range []host.Locality{zoneA, zoneB, zoneC} {
		for i := range n[z] {
			hs = append(hs, lbtest.Host(t, host.Config{Address: fmt.Sprintf("%s.%d.%d:80", prefix, z, i), Locality: loc, Health: health(z, i)}))
		}
	}
	ps, err := host.Build(hs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestZoneAwareRouting(t *testing.T) {
	tests := []struct {
		name     string
		upstream [3]int
		local    [3]int
		minSize  *uint64
		want     []float64 // expected share per zone
	}{
		// Local cluster 1/1/1 vs upstream 2/2/2: the local zone has enough capacity.
		{"direct", [3]int{2, 2, 2}, [3]int{1, 1, 1}, nil, []float64{1, 0, 0}},
		// Local 1/1/0 (a = 50%) vs upstream 2/2/2 (a = 33.33%): 66.66% stays local, the
		// residual goes to c, the only zone with spare capacity.
		{"residual", [3]int{2, 2, 2}, [3]int{1, 1, 0}, nil, []float64{6666, 0, 3334}},
		// Below min_cluster_size zone-aware routing is off: spread over all zones.
		{"cluster too small", [3]int{2, 2, 2}, [3]int{1, 1, 0}, ptr(uint64(7)), []float64{1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := zonedSet(t, "10", tc.upstream)
			b, err := roundrobin.New(lb.Params{PrioritySet: up, Local: zonedSet(t, "20", tc.local), Rand: lbtest.Rand(4)},
				&lb.Config{ZoneAware: lb.ZoneAwareConfig{MinClusterSize: tc.minSize}})
			if err != nil {
				t.Fatal(err)
			}
			counts := lbtest.Count(t, b, nil, 30000)
			byZone := map[*host.Host]int{}
			perLoc := up.Sets()[0].HostsPerLocality()
			zoneHosts := make([]*host.Host, 3)
			for z := range 3 {
				zoneHosts[z] = perLoc[z][0]
				for _, h := range perLoc[z] {
					byZone[zoneHosts[z]] += counts[h]
				}
			}
			lbtest.ChiSquare(t, zoneHosts, tc.want, byZone)
		})
	}
}

func TestLocalityWeightedPicking(t *testing.T) {
	var hs []*host.Host
	for z, loc := range []host.Locality{zoneA, zoneB, zoneC} {
		for i := range 2 {
			f := host.HealthFlag(0)
			if z == 2 && i == 0 {
				f = host.FailedActiveHC // zone c half healthy: effective weight × min(1, 1.4×0.5)
			}
			hs = append(hs, lbtest.Host(t, host.Config{Address: fmt.Sprintf("10.%d.%d:80", z, i), Locality: loc, Health: f}))
		}
	}
	ps, err := host.Build(hs, host.SetConfig{LocalityWeights: map[host.Locality]uint32{zoneA: 1, zoneB: 2, zoneC: 10}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := roundrobin.New(lb.Params{PrioritySet: ps, Rand: lbtest.Rand(8)}, &lb.Config{LocalityWeighted: true})
	if err != nil {
		t.Fatal(err)
	}
	counts := lbtest.Count(t, b, nil, 30000)
	if counts[hs[4]] != 0 {
		t.Errorf("unhealthy host picked %d times; want 0", counts[hs[4]])
	}
	// Zone c: 10 × 0.7 = 7 shared by one host; zones a and b split 1 and 2 over two hosts.
	lbtest.ChiSquare(t, hs, []float64{0.5, 0.5, 1, 1, 0, 7}, counts)
}

// BenchmarkPickLayers is a round-robin pick through Base's priority and locality layers over
// 100 hosts: locality weighted (a locality schedule, then the locality's own), zone-aware
// routing with residual capacity (a draw and a per-P lb_zone_routing_* line), and a spill
// over two priority levels (a draw). Each is serial and parallel, as lbtest.BenchPick.
func BenchmarkPickLayers(b *testing.B) {
	healthy := func(zone, i int) host.HealthFlag { return 0 }
	n := [3]int{34, 33, 33}
	build := func(p lb.Params, cfg *lb.Config) lb.Balancer {
		bal, err := roundrobin.New(p, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return bal
	}
	weighted := zonedBuild(b, "10", n, healthy, host.SetConfig{LocalityWeights: map[host.Locality]uint32{zoneA: 1, zoneB: 2, zoneC: 10}})
	lbtest.BenchBalancer(b, "locality_weighted", build(lb.Params{PrioritySet: weighted}, &lb.Config{LocalityWeighted: true}), lbtest.PlainContext)
	// Local 1/1/0 against upstream 34/33/33: two thirds stay local, the rest goes to c.
	lbtest.BenchBalancer(b, "zone_aware", build(lb.Params{PrioritySet: zonedSet(b, "10", n), Local: zonedSet(b, "20", [3]int{1, 1, 0})}, nil), lbtest.PlainContext)
	// Priority 0 half healthy: 70 % of the load (overprovisioning 1.4), 30 % spills to 1.
	spill, err := host.NewPrioritySet(level(b, 0, 25, 0, 25, 0), level(b, 1, 50, 0, 0, 0))
	if err != nil {
		b.Fatal(err)
	}
	lbtest.BenchBalancer(b, "two_priorities", build(lb.Params{PrioritySet: spill}, nil), lbtest.PlainContext)
}
