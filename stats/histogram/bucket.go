package histogram

import "math"

// The log-linear bin layout of libcircllhist (the 2019 version Envoy pins).
//
// A bin is (val, exp): val has two significant decimal digits (10..99, or
// -99..-10 for the negative side) and the bin covers
// [val/10 × 10^exp, (val+1)/10 × 10^exp). The zero bin holds 0 alone.
//
// Inside this package a bin is named by a key, an int16 that sorts the same
// way as the bins sit on the real axis: 0 is the zero bin, 1 + exp×90 +
// (val-10) is a positive bin, and its negation is the mirrored negative bin.
// Negative bins only appear for values of 2^63 or more: Envoy passes the
// uint64 to hist_insert_intscale as an int64, so those wrap to negative
// numbers, and this package reproduces that.

const (
	// binsPerDecade is the number of two-digit mantissas, 10 through 99.
	binsPerDecade = 90
	// decades is the number of exponents an int64 magnitude can reach:
	// 1..9 → 0, 10..99 → 1, …, up to 9.2e18 → 18.
	decades = 19
)

// pow10f holds 10^exp as circllhist's power_of_ten table does; every entry
// is an exact double.
var pow10f = [decades]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
}

// binOf returns the exponent and mantissa index (val-10) of the positive
// bin holding m, for 1 <= m < 2^63 (and m == 2^63, which circllhist folds
// into INT64_MAX's bin). It is int_scale_to_hist_bucket with scale 0: values
// below 10 are multiplied by ten, larger ones divided down to two digits.
func binOf(m uint64) (exp, idx int) {
	if m < 10 {
		return 0, int(m)*10 - 10
	}
	return binOfLarge(m)
}

// binOfLarge is binOf for m >= 10. Divisions use constants so the
// compiler turns them into multiplications.
func binOfLarge(m uint64) (exp, idx int) {
	switch {
	case m < 100:
		return 1, int(m) - 10
	case m < 1e3:
		return 2, int(m/1e1) - 10
	case m < 1e4:
		return 3, int(m/1e2) - 10
	case m < 1e5:
		return 4, int(m/1e3) - 10
	case m < 1e6:
		return 5, int(m/1e4) - 10
	case m < 1e7:
		return 6, int(m/1e5) - 10
	case m < 1e8:
		return 7, int(m/1e6) - 10
	case m < 1e9:
		return 8, int(m/1e7) - 10
	case m < 1e10:
		return 9, int(m/1e8) - 10
	case m < 1e11:
		return 10, int(m/1e9) - 10
	case m < 1e12:
		return 11, int(m/1e10) - 10
	case m < 1e13:
		return 12, int(m/1e11) - 10
	case m < 1e14:
		return 13, int(m/1e12) - 10
	case m < 1e15:
		return 14, int(m/1e13) - 10
	case m < 1e16:
		return 15, int(m/1e14) - 10
	case m < 1e17:
		return 16, int(m/1e15) - 10
	case m < 1e18:
		return 17, int(m/1e16) - 10
	case m <= math.MaxInt64:
		return 18, int(m/1e17) - 10
	default:
		// Only 2^63 reaches here: circllhist turns INT64_MIN into INT64_MAX.
		return binOfLarge(math.MaxInt64)
	}
}

// negativeMagnitude returns |int64(v)| for a v whose int64 reading is
// negative (v >= 2^63), the magnitude circllhist bins with a negative sign.
func negativeMagnitude(v uint64) uint64 {
	return -v // two's complement: 2^64 - v, which is 2^63 for v == 2^63
}

// keyOf returns the sort key of bin (exp, idx) on the given side.
func keyOf(exp, idx int, negative bool) int16 {
	k := int16(1 + exp*binsPerDecade + idx)
	if negative {
		return -k
	}
	return k
}

// keyForValue returns the bin key of a value as Envoy records it.
func keyForValue(v uint64) int16 {
	if v == 0 {
		return 0
	}
	if int64(v) < 0 {
		exp, idx := binOf(negativeMagnitude(v))
		return keyOf(exp, idx, true)
	}
	exp, idx := binOf(v)
	return keyOf(exp, idx, false)
}

// decode splits a non-zero key into its signed mantissa and exponent.
func decode(k int16) (val, exp int) {
	m := int(k)
	sign := 1
	if m < 0 {
		m, sign = -m, -1
	}
	m--
	return sign * (10 + m%binsPerDecade), m / binsPerDecade
}

// lowerValue is hist_bucket_to_double: (val/10.0) × 10^exp, in that order.
// For a negative bin it is the end nearer zero.
func lowerValue(k int16) float64 {
	if k == 0 {
		return 0
	}
	val, exp := decode(k)
	return float64(val) / 10.0 * pow10f[exp]
}

// binWidth is hist_bucket_to_double_bin_width: 10^exp / 10.0, and 0 for
// the zero bin.
func binWidth(k int16) float64 {
	if k == 0 {
		return 0
	}
	_, exp := decode(k)
	return pow10f[exp] / 10.0
}

// midpoint is hist_bucket_midpoint, the value a bin contributes to a sum.
func midpoint(k int16) float64 {
	if k == 0 {
		return 0
	}
	out, w := lowerValue(k), binWidth(k)
	if out < 0 {
		w = -w
	}
	return out + w/2.0
}

// leftEdge is hist_bucket_left, the end of a bin nearer -Inf, which
// quantile interpolation starts from.
func leftEdge(k int16) float64 {
	if k == 0 {
		return 0
	}
	out := lowerValue(k)
	if out > 0 {
		return out
	}
	return out - binWidth(k)
}

// upperEdge is the bound hist_approx_count_below compares: lower + width
// for positive bins, the value itself for negative ones, 0 for zero.
func upperEdge(k int16) float64 {
	out := lowerValue(k)
	if out <= 0 {
		return out
	}
	return out + binWidth(k)
}
