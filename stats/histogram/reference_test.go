package histogram

import (
	"math"
	"slices"
)

// refHist is a deliberately plain model of libcircllhist's arithmetic,
// written from its description rather than from this package's code: a map
// from (val, exp) to count, read back by enumerating every possible bin in
// real-axis order instead of sorting.
type refHist struct {
	counts map[[2]int]uint64 // {val, exp} → count
}

func newRefHist() *refHist { return &refHist{counts: map[[2]int]uint64{}} }

// record follows hist_insert_intscale(h, int64(v), 0, 1): the uint64 is
// read as an int64, its sign kept, and its magnitude brought to two digits
// by repeated division.
func (r *refHist) record(v uint64) {
	value := int64(v)
	if value == 0 {
		r.counts[[2]int{0, 0}]++
		return
	}
	sign := int64(1)
	if value < 0 {
		if value == math.MinInt64 {
			value = math.MaxInt64
		} else {
			value = -value
		}
		sign = -1
	}
	scale := 1
	if value < 10 {
		value *= 10
		scale--
	}
	for value >= 100 {
		value /= 10
		scale++
	}
	r.counts[[2]int{int(sign * value), scale}]++
}

type refBin struct {
	val, exp int
	count    uint64
}

// ordered lists the non-empty bins from -Inf to +Inf.
func (r *refHist) ordered() []refBin {
	var out []refBin
	add := func(val, exp int) {
		if c := r.counts[[2]int{val, exp}]; c > 0 {
			out = append(out, refBin{val, exp, c})
		}
	}
	for exp := 18; exp >= 0; exp-- {
		for val := -99; val <= -10; val++ {
			add(val, exp)
		}
	}
	add(0, 0)
	for exp := 0; exp <= 18; exp++ {
		for val := 10; val <= 99; val++ {
			add(val, exp)
		}
	}
	return out
}

func refToDouble(b refBin) float64 {
	if b.val == 0 {
		return 0
	}
	return float64(b.val) / 10.0 * math.Pow10(b.exp)
}

func refWidth(b refBin) float64 {
	if b.val == 0 {
		return 0
	}
	return math.Pow10(b.exp) / 10.0
}

func (r *refHist) sum() float64 {
	sum := 0.0
	for _, b := range r.ordered() {
		mid := 0.0
		if b.val != 0 {
			out, w := refToDouble(b), refWidth(b)
			if out < 0 {
				w *= -1
			}
			mid = out + w/2.0
		}
		sum += float64(mid * float64(b.count)) // unfused, as C computes it
	}
	return sum
}

func (r *refHist) countBelow(threshold float64) uint64 {
	var n uint64
	for _, b := range r.ordered() {
		out := refToDouble(b)
		upper := out
		if out >= 0 {
			upper = out + refWidth(b)
		}
		if upper > threshold {
			break
		}
		n += b.count
	}
	return n
}

// quantiles is hist_approx_quantile for ascending qs in [0, 1].
func (r *refHist) quantiles(qs []float64) []float64 {
	bins := r.ordered()
	out := make([]float64, len(qs))
	total := 0.0
	for _, b := range bins {
		total += float64(b.count)
	}
	if total == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	var width, left, lower, upper float64
	track := func(b refBin) {
		width = refWidth(b)
		left = refToDouble(b)
		if left < 0 {
			left -= width
		}
		lower = upper
		upper = lower + float64(b.count)
	}
	i := 0
	track(bins[0])
	for k, q := range qs {
		t := total * q
		for i < len(bins)-1 && upper < t {
			i++
			track(bins[i])
		}
		switch {
		case lower == t:
			out[k] = left
		case upper == t:
			out[k] = left + width
		case width == 0:
			out[k] = left
		default:
			out[k] = left + float64((t-lower)/(upper-lower)*width) // unfused
		}
	}
	return out
}

// sameFloats reports whether two slices hold bit-identical numbers, any
// NaN matching any NaN.
func sameFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || (math.IsNaN(x) && math.IsNaN(y))
	})
}
