package lb

import "github.com/legateproxy/legate/host"

// PriorityLoad is the share of traffic, in percent, each priority level receives, split into
// load served by healthy hosts and load served by degraded hosts; the two slices always sum to
// 100 together. Panic marks levels that use all their hosts regardless of health.
type PriorityLoad struct {
	Healthy  []uint32
	Degraded []uint32
	Panic    []bool
}

// ComputePriorityLoad implements Envoy's priority load computation
// (LoadBalancerBase::recalculatePerPriorityState and recalculatePerPriorityPanic):
//
//   - each level's health is min(100, overprovisioning × healthy / (hosts − excluded)), counted
//     in hosts or, with weighted_priority_health, in weights; degraded availability alike;
//   - load goes to the highest levels first, each taking at most its availability scaled so that
//     the total availability (capped at 100) becomes 100; healthy load first, then degraded;
//     rounding left-overs go to the first level with availability;
//   - a level is in panic when total availability is below 100 and its healthy plus degraded
//     host percentage is below panicThreshold; when all levels are in panic, load is split by
//     host counts.
func ComputePriorityLoad(sets []*host.Set, panicThreshold uint32) PriorityLoad {
	n := len(sets)
	pl := PriorityLoad{Healthy: make([]uint32, n), Degraded: make([]uint32, n), Panic: make([]bool, n)}
	health, degraded := availabilities(sets)
	total := normalizedAvailability(health, degraded)
	if total != 0 {
		firstHealthy, left := distributeLoad(pl.Healthy, health, 100, total)
		firstDegraded, left := distributeLoad(pl.Degraded, degraded, left, total)
		if left != 0 {
			if firstHealthy >= 0 {
				pl.Healthy[firstHealthy] += left
			} else {
				pl.Degraded[firstDegraded] += left
			}
		}
	}
	threshold := min(panicThreshold, 100)
	if threshold == 0 && total == 0 {
		// No panic and nothing available: all load nominally to P0, where nothing is picked.
		if n > 0 {
			pl.Healthy[0] = 100
		}
		return pl
	}
	totalPanic := n > 0
	for i, s := range sets {
		pl.Panic[i] = total != 100 && InPanic(s, threshold)
		totalPanic = totalPanic && pl.Panic[i]
	}
	if totalPanic {
		loadInTotalPanic(sets, &pl)
	}
	return pl
}

// availabilities returns each level's healthy and degraded availability (see availability).
func availabilities(sets []*host.Set) (health, degraded []uint32) {
	health, degraded = make([]uint32, len(sets)), make([]uint32, len(sets))
	for i, s := range sets {
		health[i], degraded[i] = availability(s)
	}
	return health, degraded
}

func availability(s *host.Set) (health, degraded uint32) {
	count := len(s.Hosts()) - len(s.ExcludedHosts())
	if count <= 0 {
		return 0, 0
	}
	var healthyW, degradedW, totalW uint64
	if s.WeightedPriorityHealth() {
		healthyW, degradedW = sumWeights(s.HealthyHosts()), sumWeights(s.DegradedHosts())
		totalW = sumWeights(s.Hosts()) - sumWeights(s.ExcludedHosts())
	} else {
		healthyW, degradedW, totalW = uint64(len(s.HealthyHosts())), uint64(len(s.DegradedHosts())), uint64(count)
	}
	if totalW == 0 {
		return 0, 0
	}
	factor := uint64(s.OverprovisioningFactor())
	return uint32(min(100, factor*healthyW/totalW)), uint32(min(100, factor*degradedW/totalW))
}

func sumWeights(hs []*host.Host) uint64 {
	var sum uint64
	for _, h := range hs {
		sum += uint64(h.Weight())
	}
	return sum
}

func normalizedAvailability(health, degraded []uint32) uint32 {
	var sum uint32
	for i := range health {
		sum += health[i] + degraded[i]
		if sum >= 100 {
			return 100
		}
	}
	return sum
}

func distributeLoad(load, avail []uint32, total, normalizedTotal uint32) (first int, left uint32) {
	first = -1
	for i := range avail {
		if first < 0 && avail[i] > 0 {
			first = i
		}
		load[i] = min(total, avail[i]*100/normalizedTotal)
		total -= load[i]
	}
	return first, total
}

func loadInTotalPanic(sets []*host.Set, pl *PriorityLoad) {
	totalHosts := 0
	for _, s := range sets {
		totalHosts += len(s.Hosts())
	}
	for i := range pl.Healthy {
		pl.Healthy[i], pl.Degraded[i] = 0, 0
	}
	if totalHosts == 0 {
		pl.Healthy[0] = 100
		return
	}
	left := uint32(100)
	firstNonEmpty := -1
	for i, s := range sets {
		if firstNonEmpty < 0 && len(s.Hosts()) > 0 {
			firstNonEmpty = i
		}
		pl.Healthy[i] = uint32(100 * len(s.Hosts()) / totalHosts)
		left -= pl.Healthy[i]
	}
	pl.Healthy[firstNonEmpty] += left
}

// InPanic reports whether the level's healthy plus degraded share of non-excluded hosts is below
// threshold percent (Envoy's isHostSetInPanic).
func InPanic(s *host.Set, threshold uint32) bool {
	count := len(s.Hosts()) - len(s.ExcludedHosts())
	var healthyPct, degradedPct float64
	if count > 0 {
		healthyPct = 100 * float64(len(s.HealthyHosts())) / float64(count)
		degradedPct = 100 * float64(len(s.DegradedHosts())) / float64(count)
	}
	return healthyPct+degradedPct < float64(min(threshold, 100))
}

// ChoosePriority maps a hash (or random number) to a priority level: hash%100+1 falls into the
// cumulative healthy loads first, then the degraded loads (Envoy's choosePriority). The second
// result reports that the level was chosen for its degraded hosts.
func (pl *PriorityLoad) ChoosePriority(hash uint64) (priority int, degraded bool) {
	h := uint32(hash%100 + 1)
	var sum uint32
	for i, l := range pl.Healthy {
		sum += l
		if h <= sum {
			return i, false
		}
	}
	for i, l := range pl.Degraded {
		sum += l
		if h <= sum {
			return i, true
		}
	}
	return 0, false
}

// maxExcludable is how many levels a retry priority can leave out (Context's bit sets).
const maxExcludable = 64

// choosePriorityExcluding is ChoosePriority over the load spread again without the levels in
// excluded (Envoy's PreviousPrioritiesRetryPriority::adjustForAttemptedPriorities): the levels
// left keep their availability, their total (capped at 100) becomes 100 percent, healthy
// load goes first then degraded, and the rounding left-over is handed out again from the
// first level, pass after pass, until none is left. ok is false when no level left has
// availability. It allocates nothing: the loads live on the stack.
func choosePriorityExcluding(health, degraded []uint32, excluded, hash uint64) (priority int, isDegraded, ok bool) {
	n := min(len(health), maxExcludable)
	var total uint32
	for i := range n {
		if excluded&(1<<i) == 0 {
			total += health[i] + degraded[i]
		}
	}
	total = min(total, 100)
	if total == 0 {
		return 0, false, false
	}
	var hl, dl [maxExcludable]uint32
	for left := uint32(100); left != 0; {
		left = spreadExcluding(hl[:n], health, excluded, left, total)
		left = spreadExcluding(dl[:n], degraded, excluded, left, total)
	}
	p, d := (&PriorityLoad{Healthy: hl[:n], Degraded: dl[:n]}).ChoosePriority(hash)
	return p, d, true
}

// spreadExcluding adds to load each level's share of left (its availability over total)
// but for the excluded levels, and returns what is left.
func spreadExcluding(load, avail []uint32, excluded uint64, left, total uint32) uint32 {
	for i := range load {
		if excluded&(1<<i) != 0 {
			continue
		}
		d := min(left, avail[i]*100/total)
		load[i] += d
		left -= d
	}
	return left
}
