package lb

import "github.com/legateproxy/legate/host"

// localityRouting is the zone-aware routing state of priority 0 (Envoy's LocalityRoutingState).
type localityRouting uint8

const (
	noLocalityRouting localityRouting = iota
	localityDirect                    // all traffic to the local locality
	localityResidual                  // part local, the rest by residual capacity
)

// zoneState is the precomputed zone-aware routing plan for priority 0.
type zoneState struct {
	routing localityRouting
	// localPercentToRoute is, in 1/10000, the share of requests kept in the local locality.
	localPercentToRoute uint64
	// residual holds cumulative residual capacities per upstream locality (1/10000 units).
	residual []uint64
	// localPanic: the local cluster itself is in panic, so zone routing is skipped.
	localPanic bool
}

// newZoneState implements Envoy's ZoneAwareLoadBalancerBase::regenerateLocalityRoutingStructures
// for upstream priority 0 against the local cluster's priority 0, counting
// lb_recalculate_zone_structures and the reasons routing is off in st.
func newZoneState(upstream, local *host.Set, minClusterSize uint64, panicThreshold uint32, st *Stats) zoneState {
	var z zoneState
	if local == nil || upstream == nil {
		return z
	}
	st.RecalculateZoneStructures.Inc()
	z.localPanic = InPanic(local, panicThreshold)
	up := upstream.HealthyHostsPerLocality()
	if len(up) < 2 {
		return z
	}
	if len(local.HostsPerLocality()) < 2 {
		return z
	}
	if !local.HasLocalLocality() || len(local.HostsPerLocality()[0]) == 0 {
		st.LocalClusterNotOK.Inc()
		return z
	}
	if uint64(len(upstream.HealthyHosts())) < minClusterSize {
		st.ZoneClusterTooSmall.Inc()
		return z
	}
	pcts := localityPercentages(local, upstream)
	if upstream.HasLocalLocality() && pcts[0].upstream > 0 && pcts[0].upstream >= pcts[0].local {
		z.routing = localityDirect
		return z
	}
	z.routing = localityResidual
	if upstream.HasLocalLocality() && pcts[0].local > 0 {
		z.localPercentToRoute = pcts[0].upstream * 10000 / pcts[0].local
	}
	z.residual = make([]uint64, len(up))
	for i := range up {
		var last uint64
		if i > 0 {
			last = z.residual[i-1]
		}
		z.residual[i] = last
		if i == 0 && upstream.HasLocalLocality() {
			continue
		}
		if pcts[i].upstream > pcts[i].local {
			z.residual[i] += pcts[i].upstream - pcts[i].local
		}
	}
	return z
}

type localityPercentage struct{ local, upstream uint64 }

// localityPercentages returns, per upstream locality, the share (in 1/10000) of healthy local
// cluster hosts and of healthy upstream hosts in that locality.
func localityPercentages(local, upstream *host.Set) []localityPercentage {
	localCounts := map[host.Locality]uint64{}
	var totalLocal uint64
	for i, hs := range local.HealthyHostsPerLocality() {
		totalLocal += uint64(len(hs))
		if len(hs) > 0 {
			localCounts[local.Localities()[i]] = uint64(len(hs))
		}
	}
	var totalUp uint64
	for _, hs := range upstream.HealthyHostsPerLocality() {
		totalUp += uint64(len(hs))
	}
	out := make([]localityPercentage, len(upstream.HealthyHostsPerLocality()))
	for i, hs := range upstream.HealthyHostsPerLocality() {
		if len(hs) == 0 {
			continue
		}
		if totalLocal > 0 {
			out[i].local = 10000 * localCounts[upstream.Localities()[i]] / totalLocal
		}
		if totalUp > 0 {
			out[i].upstream = 10000 * uint64(len(hs)) / totalUp
		}
	}
	return out
}

// chooseLocality implements tryChooseLocalLocalityHosts: the locality index for one request,
// counted in st as routed directly, sampled or cross zone.
func (z *zoneState) chooseLocality(rnd func() uint64, numLocalities int, st *Stats) int {
	if z.routing == localityDirect {
		st.ZoneRoutingAllDirectly.Inc()
		return 0
	}
	if rnd()%10000 < z.localPercentToRoute {
		st.ZoneRoutingSampled.Inc()
		return 0
	}
	st.ZoneRoutingCrossZone.Inc()
	last := z.residual[numLocalities-1]
	if last == 0 {
		st.ZoneNoCapacityLeft.Inc()
		return int(rnd() % uint64(numLocalities))
	}
	threshold := rnd() % last
	i := 0
	for threshold >= z.residual[i] {
		i++
	}
	return i
}
