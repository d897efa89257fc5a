package runtime

// layer is one loaded layer of a snapshot. Its values never change; a layer
// that changes is replaced by a new map in the next snapshot.
type layer struct {
	name   string
	values map[string]entry
}

// Snapshot is an immutable view of the runtime: the loaded layers and the
// merged values (a later layer overrides an earlier one). Envoy's
// Runtime::Snapshot. Safe for concurrent use; lookups take no lock and do not
// allocate.
type Snapshot struct {
	layers     []layer
	values     map[string]*entry
	random     func() uint64
	stats      *Stats
	superseded chan struct{} // closed when a newer snapshot is published
}

func newSnapshot(layers []layer, random func() uint64, st *Stats) *Snapshot {
	s := &Snapshot{
		layers:     layers,
		values:     map[string]*entry{},
		random:     random,
		stats:      st,
		superseded: make(chan struct{}),
	}
	for i := range layers {
		for k := range layers[i].values {
			e := layers[i].values[k]
			s.values[k] = &e
		}
	}
	return s
}

func (s *Snapshot) lookup(key string) *entry {
	if key == "" {
		return nil
	}
	return s.values[key]
}

// Get returns the raw string value of key.
func (s *Snapshot) Get(key string) (string, bool) {
	e := s.lookup(key)
	if e == nil {
		return "", false
	}
	return e.raw, true
}

// Keys returns the number of distinct keys across all layers.
func (s *Snapshot) Keys() int { return len(s.values) }

// Uint64 returns key as an unsigned integer (a non-negative number, floored),
// or def when the key is missing or not such a number (Envoy's getInteger).
func (s *Snapshot) Uint64(key string, def uint64) uint64 {
	if e := s.lookup(key); e != nil && e.hasUint {
		return e.uintV
	}
	return def
}

// Double returns key as a number, or def (Envoy's getDouble).
func (s *Snapshot) Double(key string, def float64) float64 {
	if e := s.lookup(key); e != nil && e.hasDouble {
		return e.doubleV
	}
	return def
}

// Bool returns key as a boolean (true/false, or an integral number: non-zero
// is true), or def (Envoy's getBoolean).
func (s *Snapshot) Bool(key string, def bool) bool {
	if e := s.lookup(key); e != nil && e.hasBool {
		return e.boolV
	}
	return def
}

// FeatureEnabled reports whether a feature gated by key, a percentage
// defaulting to defaultPercent, is on for this call: true with probability
// min(value, 100)/100 (Envoy's featureEnabled(key, default_value)).
func (s *Snapshot) FeatureEnabled(key string, defaultPercent uint64) bool {
	cutoff := min(s.Uint64(key, defaultPercent), 100)
	switch cutoff {
	case 0:
		return false
	case 100:
		return true
	}
	return s.random()%100 < cutoff
}

// FeatureEnabledWith is FeatureEnabled with a caller-chosen random value and
// bucket count: random % buckets < min(value, buckets). buckets must be > 0.
func (s *Snapshot) FeatureEnabledWith(key string, defaultValue, random, buckets uint64) bool {
	if buckets == 0 {
		return false
	}
	return random%buckets < min(s.Uint64(key, defaultValue), buckets)
}

// FractionalPercent reports whether a feature gated by a fractional percent
// is on for this call (Envoy's featureEnabled(key, FractionalPercent)).
func (s *Snapshot) FractionalPercent(key string, def Percent) bool {
	return s.FractionalPercentWith(key, def, s.random())
}

// FractionalPercentWith is FractionalPercent with a caller-chosen random
// value. A key holding a fractional percent struct uses it; a key holding an
// integer n uses n/100, and any n > 100 is always on; otherwise def is used.
// The result is random % denominator < numerator.
func (s *Snapshot) FractionalPercentWith(key string, def Percent, random uint64) bool {
	p := def
	if e := s.lookup(key); e != nil {
		switch {
		case e.hasFrac:
			p = e.fraction
		case e.hasUint:
			if e.uintV > 100 {
				return true
			}
			p = Percent{Numerator: uint32(e.uintV), Denominator: Hundred}
		}
	}
	return random%p.Denominator.Value() < uint64(p.Numerator)
}

// DeprecatedFeatureEnabled reports whether a deprecated feature may be used:
// key, else envoy.features.enable_all_deprecated_features, else def. When
// allowed it counts runtime.deprecated_feature_use.
func (s *Snapshot) DeprecatedFeatureEnabled(key string, def bool) bool {
	if !s.Bool(key, s.Bool("envoy.features.enable_all_deprecated_features", def)) {
		return false
	}
	s.stats.DeprecatedFeatureUse.Inc()
	s.stats.DeprecatedFeatureSeen.Inc()
	return true
}

// Changed returns a channel closed when a newer snapshot replaces this one.
func (s *Snapshot) Changed() <-chan struct{} { return s.superseded }
