package lb

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/registry"
)

// ErrNoHealthyHost is returned by Pick when no host can be selected (Envoy's "no healthy upstream").
var ErrNoHealthyHost = errors.New("no healthy upstream host")

// Balancer picks an upstream host for one request.
//
// A Balancer is an immutable snapshot built from one host.PrioritySet: Pick is safe for
// concurrent use, takes no lock, never blocks and does not allocate. A host-set change is
// published by building a new Balancer.
type Balancer interface {
	// Pick returns the host for the request described by ctx (nil means no context: no hash
	// key, no criteria, no retry exclusions). It returns ErrNoHealthyHost when nothing can be
	// picked.
	Pick(ctx *Context) (*host.Host, error)
}

// MaxAttempted is how many previously attempted hosts a Context remembers.
const MaxAttempted = 4

// Criterion is one metadata match criterion (route metadata_match under envoy.lb), the value
// stringified as in host.Config.Metadata.
type Criterion struct {
	Name  string
	Value string
}

// Context carries what a balancer may use from the request. The zero value is a valid context.
// A Context belongs to one request and is not safe for concurrent use.
type Context struct {
	// HashKey is the request hash computed by the route hash policy (ring hash, Maglev);
	// meaningful only when HasHashKey is set.
	HashKey    uint64
	HasHashKey bool
	// MetadataMatch are the subset criteria, sorted by Name (see SortCriteria). The slice is
	// read, never modified, so a route may share one precomputed slice among requests.
	MetadataMatch []Criterion
	// OverrideHost is the "ip:port" destination for ORIGINAL_DST clusters (the original
	// destination of the downstream connection or the x-envoy-original-dst-host header).
	OverrideHost string
	// RetryCount is how many extra picks a balancer may make when it picks an attempted host
	// (Envoy's hostSelectionRetryCount from the previous_hosts retry predicate).
	RetryCount uint32

	attempted    [MaxAttempted]*host.Host
	numAttempted uint32

	// The previous_priorities retry priority (ExcludePreviousPriorities): priorityUpdate is its
	// update_frequency (0: off), priorityAttempts the attempts recorded since the last reset,
	// attemptedPriorities their levels and excludedPriorities the levels left out of the
	// priority load, as bit sets (levels 64 and above are never excluded).
	priorityUpdate      uint32
	priorityAttempts    uint32
	attemptedPriorities uint64
	excludedPriorities  uint64
}

// ExcludePreviousPriorities turns on Envoy's envoy.retry_priorities.previous_priorities for the
// request: every updateFrequency attempts (AddAttemptedPriority), the levels attempted so far
// are left out of the priority load, which is spread again over the levels not tried. When
// no level left has availability the exclusions are forgotten and the cluster's own load
// applies again. updateFrequency 0 turns it off.
func (c *Context) ExcludePreviousPriorities(updateFrequency uint32) {
	c.priorityUpdate = updateFrequency
	c.resetPriorities()
}

// AddAttemptedPriority records that an attempt went to a host of level priority (Envoy's
// onHostAttempted of a retry priority); it does nothing unless ExcludePreviousPriorities is on.
func (c *Context) AddAttemptedPriority(priority uint32) {
	if c.priorityUpdate == 0 {
		return
	}
	c.priorityAttempts++
	if priority < 64 {
		c.attemptedPriorities |= 1 << priority
	}
	if c.priorityAttempts%c.priorityUpdate == 0 {
		c.excludedPriorities |= c.attemptedPriorities
	}
}

// resetPriorities forgets the attempted and excluded levels.
func (c *Context) resetPriorities() {
	c.priorityAttempts, c.attemptedPriorities, c.excludedPriorities = 0, 0, 0
}

// AddAttempted records h as attempted; with more than MaxAttempted hosts the oldest is forgotten.
func (c *Context) AddAttempted(h *host.Host) {
	c.attempted[c.numAttempted%MaxAttempted] = h
	c.numAttempted++
}

// Attempted reports whether h was recorded by AddAttempted.
func (c *Context) Attempted(h *host.Host) bool {
	if c == nil {
		return false
	}
	for i := range min(c.numAttempted, MaxAttempted) {
		if c.attempted[i] == h {
			return true
		}
	}
	return false
}

// MaxPicks returns how many times a balancer may pick for ctx: RetryCount+1.
func (c *Context) MaxPicks() uint32 {
	if c == nil {
		return 1
	}
	return c.RetryCount + 1
}

// SortCriteria sorts criteria by name, as Context.MetadataMatch requires.
func SortCriteria(cs []Criterion) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
}

// Params are the runtime inputs of a balancer build.
type Params struct {
	// PrioritySet is the cluster's host snapshot. Required.
	PrioritySet *host.PrioritySet
	// Local is the local cluster (cluster_manager.local_cluster_name) for zone-aware routing;
	// nil disables zone-aware routing. Only its priority 0 is used, as in Envoy.
	Local *host.PrioritySet
	// Rand returns uniformly distributed random numbers and must be safe for concurrent use.
	// Nil means math/rand/v2's Uint64 (lock-free per-thread generator). Tests pass a seeded
	// source.
	Rand func() uint64
	// Stats are the cluster's lb_* statistics the balancer updates; nil (or a nil field) means
	// not counted.
	Stats *Stats
}

// RandOrDefault returns p.Rand, or the default generator when nil.
func (p Params) RandOrDefault() func() uint64 {
	if p.Rand != nil {
		return p.Rand
	}
	return rand.Uint64
}

// HashFunction is RingHashLbConfig.hash_function.
type HashFunction uint8

// Hash functions.
const (
	XXHash HashFunction = iota
	MurmurHash2
)

// Config is the plain form of a cluster's load balancing settings (lb_policy and its config
// oneof, common_lb_config). Defaults are applied by ApplyDefaults; Validate checks bounds.
type Config struct {
	// Policy is the Envoy LbPolicy name (ROUND_ROBIN, LEAST_REQUEST, …).
	Policy string
	// HealthyPanicThreshold in percent (common_lb_config.healthy_panic_threshold); nil means
	// 50. Truncated to a whole percent; values above 100 act as 100.
	HealthyPanicThreshold *float64
	// LocalityWeighted is common_lb_config.locality_weighted_lb_config.
	LocalityWeighted bool
	// ZoneAware is common_lb_config.zone_aware_lb_config; used only with Params.Local.
	ZoneAware ZoneAwareConfig

	LeastRequest LeastRequestConfig
	RingHash     RingHashConfig
	Maglev       MaglevConfig
	// UseHostnameForHashing is consistent_hashing_lb_config.use_hostname_for_hashing.
	UseHostnameForHashing bool
}

// ZoneAwareConfig is CommonLbConfig.ZoneAwareLbConfig.
type ZoneAwareConfig struct {
	// RoutingEnabled in percent of requests considered for zone-aware routing; nil means 100.
	RoutingEnabled *float64
	// MinClusterSize; nil means 6.
	MinClusterSize *uint64
	// FailTrafficOnPanic fails requests instead of using all hosts when in panic.
	FailTrafficOnPanic bool
}

// LeastRequestConfig is Cluster.LeastRequestLbConfig.
type LeastRequestConfig struct {
	// ChoiceCount; 0 means 2. Must be >= 2 when set.
	ChoiceCount uint32
	// ActiveRequestBias; nil means 1.0. Must be >= 0.
	ActiveRequestBias *float64
}

// RingHashConfig is Cluster.RingHashLbConfig.
type RingHashConfig struct {
	// MinimumRingSize; 0 means 1024. At most 8M.
	MinimumRingSize uint64
	// MaximumRingSize; 0 means 8M. At most 8M.
	MaximumRingSize uint64
	// HashFunction: XXHash (default) or MurmurHash2.
	HashFunction HashFunction
}

// MaglevConfig is Cluster.MaglevLbConfig.
type MaglevConfig struct {
	// TableSize; 0 means 65537. Must be prime, at most 5000011.
	TableSize uint64
}

// Ring, Maglev and least-request bounds and defaults from Envoy's API.
const (
	DefaultMinRingSize      = 1024
	MaxRingSize             = 8 * 1024 * 1024
	DefaultMaglevTableSize  = 65537
	MaxMaglevTableSize      = 5000011
	DefaultChoiceCount      = 2
	DefaultPanicThreshold   = 50
	DefaultMinClusterSize   = 6
	DefaultRoutingEnabled   = 100
	defaultActiveRequestBia = 1.0
)

// PanicThreshold returns the truncated healthy panic threshold in percent (0..100).
func (c *Config) PanicThreshold() uint32 {
	if c == nil || c.HealthyPanicThreshold == nil {
		return DefaultPanicThreshold
	}
	v := *c.HealthyPanicThreshold
	if v <= 0 || v != v {
		return 0
	}
	return uint32(min(v, 100))
}

// ChoiceCount returns least_request_lb_config.choice_count with its default.
func (c *Config) ChoiceCount() uint32 {
	if c == nil || c.LeastRequest.ChoiceCount == 0 {
		return DefaultChoiceCount
	}
	return c.LeastRequest.ChoiceCount
}

// ActiveRequestBias returns least_request_lb_config.active_request_bias with its default.
func (c *Config) ActiveRequestBias() float64 {
	if c == nil || c.LeastRequest.ActiveRequestBias == nil {
		return defaultActiveRequestBia
	}
	return *c.LeastRequest.ActiveRequestBias
}

// RingSizes returns the minimum and maximum ring sizes with defaults.
func (c *Config) RingSizes() (minSize, maxSize uint64) {
	minSize, maxSize = DefaultMinRingSize, MaxRingSize
	if c != nil && c.RingHash.MinimumRingSize != 0 {
		minSize = c.RingHash.MinimumRingSize
	}
	if c != nil && c.RingHash.MaximumRingSize != 0 {
		maxSize = c.RingHash.MaximumRingSize
	}
	return minSize, maxSize
}

// MaglevTableSize returns the table size with its default.
func (c *Config) MaglevTableSize() uint64 {
	if c == nil || c.Maglev.TableSize == 0 {
		return DefaultMaglevTableSize
	}
	return c.Maglev.TableSize
}

// Validate checks the settings against Envoy's bounds. Errors name the field, value and rule.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if v := c.HealthyPanicThreshold; v != nil && (*v < 0 || *v > 100 || *v != *v) {
		return fmt.Errorf("common_lb_config.healthy_panic_threshold = %v; must be in 0..100", *v)
	}
	if v := c.ZoneAware.RoutingEnabled; v != nil && (*v < 0 || *v > 100 || *v != *v) {
		return fmt.Errorf("common_lb_config.zone_aware_lb_config.routing_enabled = %v; must be in 0..100", *v)
	}
	if n := c.LeastRequest.ChoiceCount; n == 1 {
		return fmt.Errorf("least_request_lb_config.choice_count = %d; must be >= 2", n)
	}
	if v := c.LeastRequest.ActiveRequestBias; v != nil && (*v < 0 || *v != *v) {
		return fmt.Errorf("least_request_lb_config.active_request_bias = %v; must be >= 0", *v)
	}
	minSize, maxSize := c.RingSizes()
	if minSize > MaxRingSize {
		return fmt.Errorf("ring_hash_lb_config.minimum_ring_size = %d; must be <= %d", minSize, MaxRingSize)
	}
	if maxSize > MaxRingSize {
		return fmt.Errorf("ring_hash_lb_config.maximum_ring_size = %d; must be <= %d", maxSize, MaxRingSize)
	}
	if minSize > maxSize {
		return fmt.Errorf("ring_hash_lb_config.minimum_ring_size = %d; must be <= maximum_ring_size (%d)", minSize, maxSize)
	}
	if c.RingHash.HashFunction > MurmurHash2 {
		return fmt.Errorf("ring_hash_lb_config.hash_function = %d; must be XX_HASH or MURMUR_HASH_2", c.RingHash.HashFunction)
	}
	ts := c.MaglevTableSize()
	if ts > MaxMaglevTableSize || !isPrime(ts) {
		return fmt.Errorf("maglev_lb_config.table_size = %d; must be a prime <= %d", ts, MaxMaglevTableSize)
	}
	return nil
}

func isPrime(n uint64) bool {
	if n < 2 {
		return false
	}
	for d := uint64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// Factory builds a balancer of one policy. It validates cfg (errors name the field) and does
// all expensive work (tables, rings, schedules) so that Pick stays O(1) or O(log n).
type Factory func(p Params, cfg *Config) (Balancer, error)

// Envoy's Cluster.LbPolicy names.
const (
	RoundRobin      = "ROUND_ROBIN"
	LeastRequest    = "LEAST_REQUEST"
	RingHash        = "RING_HASH"
	Random          = "RANDOM"
	Maglev          = "MAGLEV"
	OriginalDst     = "ORIGINAL_DST_LB"
	ClusterProvided = "CLUSTER_PROVIDED"
)

// Balancers is the kind of load balancing policy extensions as the cluster manager builds
// them: a policy package registers its Factory with
//
//	registry.Add(b, lb.Balancers, "envoy.load_balancing_policies.<name>", &pb.Config{}, Factory)
//
// under the name and message package config converts the policy's configuration with.
var Balancers = registry.Kind[Factory]{Category: registry.LBPolicy, Facet: "balancer"}

// ExtensionName returns the load_balancing_policies extension that implements a cluster's
// lb_policy (ROUND_ROBIN: envoy.load_balancing_policies.round_robin); false for a name that
// is not an Envoy policy.
func ExtensionName(policy string) (string, bool) {
	switch policy {
	case RoundRobin, LeastRequest, RingHash, Random, Maglev, ClusterProvided:
		return "envoy.load_balancing_policies." + strings.ToLower(policy), true
	case OriginalDst:
		// The v2 spelling of an ORIGINAL_DST cluster's policy.
		return "envoy.load_balancing_policies.cluster_provided", true
	}
	return "", false
}
