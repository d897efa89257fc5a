package histogram

import (
	"math"
	"strconv"
)

// Unit is the unit of a histogram's recorded values, as Envoy's
// Stats::Histogram::Unit. Only Percent changes any arithmetic; the others
// are labels for sinks.
type Unit int

const (
	// Unspecified is the unit of histograms that do not name one.
	Unspecified Unit = iota
	// Bytes is for sizes.
	Bytes
	// Microseconds is for *_us timings.
	Microseconds
	// Milliseconds is for *_ms and *_time timings.
	Milliseconds
	// Percent values are recorded as fixed-point integers, the value times
	// PercentScale (see PercentValue). Quantiles and sums of a Percent
	// histogram are divided by PercentScale, and bucket bounds are
	// multiplied by it before comparison, as Envoy's
	// HistogramStatisticsImpl does.
	Percent
)

// PercentScale is Envoy's Histogram::PercentScale: the factor between a
// Percent value and the integer recorded for it.
const PercentScale = 1_000_000

// String returns the unit's name as Envoy spells it.
func (u Unit) String() string {
	switch u {
	case Unspecified:
		return "Unspecified"
	case Bytes:
		return "Bytes"
	case Microseconds:
		return "Microseconds"
	case Milliseconds:
		return "Milliseconds"
	case Percent:
		return "Percent"
	}
	return "Unit(" + strconv.Itoa(int(u)) + ")"
}

// PercentValue converts a Percent-unit value into the integer Envoy records
// for it: v × PercentScale, truncated toward zero as C++'s double to
// uint64_t conversion does. NaN and values at or below zero give 0, and
// values too large for a uint64 give math.MaxUint64 (cases where C++ is
// undefined).
func PercentValue(v float64) uint64 {
	scaled := v * PercentScale
	switch {
	case !(scaled > 0): // also catches NaN
		return 0
	case scaled >= 1<<64:
		return math.MaxUint64
	}
	return uint64(scaled)
}

// defaultBounds is Envoy's HistogramSettingsImpl::defaultBuckets. It is
// read-only; DefaultBuckets hands out copies.
var defaultBounds = [...]float64{
	0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
	60000, 300000, 600000, 1800000, 3600000,
}

// DefaultBuckets returns a new copy of the bucket bounds Envoy uses for a
// histogram that no stats_config.histogram_bucket_settings entry matches.
func DefaultBuckets() []float64 {
	b := defaultBounds
	return b[:]
}

// supportedQuantiles is Envoy's HistogramStatisticsImpl::supportedQuantiles.
var supportedQuantiles = [...]float64{0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 1}

// SupportedQuantiles returns a new copy of the ten quantiles Envoy reports
// (P0 … P100) as fractions, in the order the admin output lists them.
func SupportedQuantiles() []float64 {
	q := supportedQuantiles
	return q[:]
}
