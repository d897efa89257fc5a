package histogram

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// flushedWith records values into a new histogram of the unit and flushes.
func flushedWith(unit Unit, values ...uint64) *Histogram {
	h := New(Options{Unit: unit})
	for _, v := range values {
		h.Record(v)
	}
	h.Flush()
	return h
}

func TestBinOf(t *testing.T) {
	// The examples of envoy-admin-formats §24.1, plus the edges.
	tests := []struct {
		value    uint64
		val, exp int
	}{
		{1, 10, 0},
		{5, 50, 0},
		{9, 90, 0},
		{10, 10, 1},
		{42, 42, 1},
		{99, 99, 1},
		{100, 10, 2},
		{200, 20, 2},
		{999, 99, 2},
		{1234, 12, 3},
		{3600000, 36, 6},
		{math.MaxInt64, 92, 18},
		{1 << 63, -92, 18},       // INT64_MIN becomes -INT64_MAX
		{1<<63 + 1, -92, 18},     // -9223372036854775807
		{math.MaxUint64, -10, 0}, // -1
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.value), func(t *testing.T) {
			k := keyForValue(tt.value)
			val, exp := decode(k)
			if val != tt.val || exp != tt.exp {
				t.Errorf("bin of %d = (%d, %d); want (%d, %d)", tt.value, val, exp, tt.val, tt.exp)
			}
		})
	}
	t.Run("zero", func(t *testing.T) {
		if k := keyForValue(0); k != 0 {
			t.Errorf("keyForValue(0) = %d; want 0", k)
		}
	})
}

func TestKeysSortLikeValues(t *testing.T) {
	// Keys must order bins as circllhist's hist_bucket_cmp orders them on
	// the real axis, which is what every walk relies on.
	order := []uint64{1 << 63, math.MaxUint64 - 5, 0, 1, 9, 10, 11, 99, 100, 109, 110, 1e18, math.MaxInt64}
	prev := int16(math.MinInt16)
	for _, v := range order {
		k := keyForValue(v)
		if k < prev {
			t.Errorf("key of %d = %d sorts before the previous key %d", v, k, prev)
		}
		prev = k
	}
}

func TestBinEdges(t *testing.T) {
	tests := []struct {
		name          string
		value         uint64
		lower, width  float64
		mid, left, up float64
	}{
		{"zero", 0, 0, 0, 0, 0, 0},
		{"one", 1, 1, 0.1, 1.05, 1, 1.1},
		{"five", 5, 5, 0.1, 5.05, 5, 5.1},
		{"110 has float noise", 110, 110.00000000000001, 10, 115.00000000000001, 110.00000000000001, 120.00000000000001},
		{"200", 200, 200, 10, 205, 200, 210},
		{"250", 250, 250, 10, 255, 250, 260},
		{"negative side", math.MaxUint64, -1, 0.1, -1.05, -1.1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := keyForValue(tt.value)
			got := []float64{lowerValue(k), binWidth(k), midpoint(k), leftEdge(k), upperEdge(k)}
			want := []float64{tt.lower, tt.width, tt.mid, tt.left, tt.up}
			if !sameFloats(got, want) {
				t.Errorf("lower, width, midpoint, left, upper of %d = %v; want %v", tt.value, got, want)
			}
		})
	}
}

func TestQuantilesWorkedExamples(t *testing.T) {
	// Vectors from envoy-admin-formats §17.3, §17.4 and §24.2.
	tests := []struct {
		name   string
		unit   Unit
		values []uint64
		want   []float64
	}{
		{"200 300 300", Unspecified, []uint64{200, 300, 300},
			[]float64{200, 207.5, 302.5, 306.25, 308.5, 309.25, 309.85, 309.925, 309.985, 310}},
		{"one sample of 2", Milliseconds, []uint64{2},
			[]float64{2, 2.025, 2.05, 2.075, 2.09, 2.095, 2.099, 2.0995, 2.0999, 2.1}},
		{"one sample of 0", Milliseconds, []uint64{0},
			[]float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"one sample of 12", Milliseconds, []uint64{12},
			[]float64{12, 12.25, 12.5, 12.75, 12.9, 12.95, 12.99, 12.995, 12.999, 13}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := flushedWith(tt.unit, tt.values...).Cumulative().Quantiles(SupportedQuantiles())
			// The documented figures are shortest-form prints of the
			// doubles, so compare the same way.
			if diff := cmp.Diff(shortest(tt.want), shortest(got)); diff != "" {
				t.Errorf("Quantiles() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func shortest(fs []float64) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprint(f)
	}
	return out
}

func TestSumAndCount(t *testing.T) {
	tests := []struct {
		name   string
		unit   Unit
		values []uint64
		sum    string // %.32g, as Prometheus output prints it
		count  uint64
	}{
		{"200 sums to its midpoint", Unspecified, []uint64{200}, "205", 1},
		{"1 sums to 1.05", Unspecified, []uint64{1}, "1.0500000000000000444089209850063", 1},
		{"float noise of 110", Unspecified, []uint64{110}, "115.000000000000014210854715202", 1},
		{"zeros add nothing", Unspecified, []uint64{0, 0, 0}, "0", 3},
		{"200 300 300", Unspecified, []uint64{200, 300, 300}, "815", 3},
		{"percent divides the sum", Percent, []uint64{PercentValue(0.25)}, "0.25500000000000000444089209850063", 1},
		{"empty", Unspecified, nil, "0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := flushedWith(tt.unit, tt.values...).Cumulative()
			if got := fmt.Sprintf("%.32g", s.Sum()); got != tt.sum {
				t.Errorf("Sum() = %s; want %s", got, tt.sum)
			}
			if got := s.Count(); got != tt.count {
				t.Errorf("Count() = %d; want %d", got, tt.count)
			}
		})
	}
}

func TestCumulativeBuckets(t *testing.T) {
	tests := []struct {
		name   string
		unit   Unit
		values []uint64
		bounds []float64
		want   []uint64
	}{
		{"250 is not under 250", Unspecified, []uint64{250}, []float64{100, 250, 500}, []uint64{0, 0, 1}},
		{"0 is under every bound", Unspecified, []uint64{0}, []float64{0.5, 1, 5}, []uint64{1, 1, 1}},
		{"1 ends at 1.1", Unspecified, []uint64{1}, []float64{0.5, 1, 5}, []uint64{0, 0, 1}},
		{"above the last bound", Unspecified, []uint64{7200000}, DefaultBuckets(), make([]uint64, 19)},
		{"default bounds", Milliseconds, []uint64{0, 3, 4, 24, 99, 2400, 59000},
			DefaultBuckets(), []uint64{1, 1, 3, 3, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 7}},
		{"percent bounds are scaled", Percent,
			[]uint64{PercentValue(0.25), PercentValue(0.75), PercentValue(1.25)},
			[]float64{0.5, 1}, []uint64{1, 2}},
		{"unsorted bounds", Unspecified, []uint64{5, 50}, []float64{100, 10, 1}, []uint64{2, 1, 0}},
		{"NaN bound", Unspecified, []uint64{5}, []float64{math.NaN(), 10}, []uint64{0, 1}},
		{"empty", Unspecified, nil, []float64{1, 2}, []uint64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := flushedWith(tt.unit, tt.values...).Cumulative().CumulativeBuckets(tt.bounds)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CumulativeBuckets() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDisjointBuckets(t *testing.T) {
	s := flushedWith(Unspecified, 0, 3, 4, 24, 99, 2400).Cumulative()
	got := s.DisjointBuckets([]float64{1, 5, 25, 100, 1000})
	want := []uint64{1, 2, 1, 1, 0} // 24 sits in [24, 25), so it counts under 25
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DisjointBuckets() mismatch (-want +got):\n%s", diff)
	}
}

func TestDetailed(t *testing.T) {
	tests := []struct {
		name   string
		unit   Unit
		values []uint64
		want   []Bin
	}{
		{"200 300 300", Unspecified, []uint64{300, 200, 300}, []Bin{
			{LowerBound: 200, Width: 10, Count: 1},
			{LowerBound: 300, Width: 10, Count: 2},
		}},
		{"zero, small and float noise", Unspecified, []uint64{0, 5, 110}, []Bin{
			{LowerBound: 0, Width: 0, Count: 1},
			{LowerBound: 5, Width: 0.1, Count: 1},
			{LowerBound: 110.00000000000001, Width: 10, Count: 1},
		}},
		{"percent stays raw", Percent, []uint64{PercentValue(0.5)}, []Bin{
			{LowerBound: 500000, Width: 10000, Count: 1},
		}},
		{"empty", Unspecified, nil, []Bin{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := flushedWith(tt.unit, tt.values...).Cumulative().Detailed()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Detailed() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQuantilesEdgeCases(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name   string
		unit   Unit
		values []uint64
		qs     []float64
		want   []float64
	}{
		{"empty is NaN", Unspecified, nil, SupportedQuantiles(), []float64{nan, nan, nan, nan, nan, nan, nan, nan, nan, nan}},
		{"out of range q", Unspecified, []uint64{5}, []float64{-0.1, nan, 1.5, 1}, []float64{nan, nan, nan, 5.1}},
		{"unsorted qs", Unspecified, []uint64{200, 300, 300}, []float64{1, 0, 0.5}, []float64{310, 200, 302.5}},
		{"percent is scaled", Percent, []uint64{PercentValue(0.5)}, []float64{0, 1}, []float64{0.5, 0.51}},
		{"no qs", Unspecified, []uint64{5}, nil, []float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := flushedWith(tt.unit, tt.values...).Cumulative().Quantiles(tt.qs)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("Quantiles(%v) mismatch (-want +got):\n%s", tt.qs, diff)
			}
		})
	}
}

func TestNilSnapshot(t *testing.T) {
	var s *Snapshot
	if got := s.Count(); got != 0 {
		t.Errorf("Count() = %d; want 0", got)
	}
	if got := s.Sum(); got != 0 {
		t.Errorf("Sum() = %v; want 0", got)
	}
	if got := s.Quantiles([]float64{0.5}); !math.IsNaN(got[0]) {
		t.Errorf("Quantiles() = %v; want [NaN]", got)
	}
	if diff := cmp.Diff([]uint64{0}, s.CumulativeBuckets([]float64{1})); diff != "" {
		t.Errorf("CumulativeBuckets() mismatch (-want +got):\n%s", diff)
	}
	if got := s.Detailed(); len(got) != 0 {
		t.Errorf("Detailed() = %v; want none", got)
	}
	if got := s.Unit(); got != Unspecified {
		t.Errorf("Unit() = %v; want Unspecified", got)
	}
}

// TestMatchesReference compares every statistic, bit for bit, with the
// plain model of circllhist in reference_test.go on random data.
func TestMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	distributions := []struct {
		name string
		draw func() uint64
	}{
		{"small", func() uint64 { return r.Uint64N(20) }},
		{"latency ms", func() uint64 { return uint64(r.ExpFloat64() * 40) }},
		{"log uniform", func() uint64 { return uint64(math.Pow(10, r.Float64()*18)) }},
		{"bytes", func() uint64 { return r.Uint64N(1 << 30) }},
		{"any uint64", r.Uint64},
	}
	qs := []float64{0, 0.001, 0.1, 0.25, 0.333, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1}
	for _, d := range distributions {
		for _, n := range []int{1, 2, 3, 10, 1000, 20000} {
			t.Run(fmt.Sprintf("%s/%d", d.name, n), func(t *testing.T) {
				h := New(Options{})
				ref := newRefHist()
				for range n {
					v := d.draw()
					h.Record(v)
					ref.record(v)
				}
				h.Flush()
				compareWithReference(t, h.Cumulative(), ref, qs)
			})
		}
	}
}

func compareWithReference(t *testing.T, s *Snapshot, ref *refHist, qs []float64) {
	t.Helper()
	if got, want := s.Quantiles(qs), ref.quantiles(qs); !sameFloats(got, want) {
		t.Errorf("Quantiles() = %v; want %v", got, want)
	}
	if got, want := s.Sum(), ref.sum(); !sameFloats([]float64{got}, []float64{want}) {
		t.Errorf("Sum() = %v; want %v", got, want)
	}
	var count uint64
	for _, c := range ref.counts {
		count += c
	}
	if got := s.Count(); got != count {
		t.Errorf("Count() = %d; want %d", got, count)
	}
	bounds := append(DefaultBuckets(), 1e9, 1e12, 1e18)
	var want []uint64
	for _, b := range bounds {
		want = append(want, ref.countBelow(b))
	}
	if diff := cmp.Diff(want, s.CumulativeBuckets(bounds)); diff != "" {
		t.Errorf("CumulativeBuckets() mismatch (-want +got):\n%s", diff)
	}
	var bins []Bin
	for _, b := range ref.ordered() {
		bins = append(bins, Bin{LowerBound: refToDouble(b), Width: refWidth(b), Count: b.count})
	}
	if diff := cmp.Diff(bins, s.Detailed(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Detailed() mismatch (-want +got):\n%s", diff)
	}
}

func TestIntervalAndCumulative(t *testing.T) {
	h := New(Options{Unit: Milliseconds})
	steps := []struct {
		name            string
		record          []uint64
		interval, total uint64
		intervalP100    float64
	}{
		{"first interval", []uint64{200, 300, 300}, 3, 3, 310},
		{"idle interval", nil, 0, 3, math.NaN()},
		{"second idle interval", nil, 0, 3, math.NaN()},
		{"new data", []uint64{5, 0}, 2, 5, 5.1},
		{"more new data", []uint64{1000}, 1, 6, 1100},
	}
	ref := newRefHist()
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			stepRef := newRefHist()
			for _, v := range step.record {
				h.Record(v)
				ref.record(v)
				stepRef.record(v)
			}
			h.Flush()
			interval, cumulative := h.Snapshots()
			if got := interval.Count(); got != step.interval {
				t.Errorf("interval Count() = %d; want %d", got, step.interval)
			}
			if got := cumulative.Count(); got != step.total {
				t.Errorf("cumulative Count() = %d; want %d", got, step.total)
			}
			if got := interval.Quantiles([]float64{1})[0]; !sameFloats([]float64{got}, []float64{step.intervalP100}) {
				t.Errorf("interval P100 = %v; want %v", got, step.intervalP100)
			}
			qs := SupportedQuantiles()
			compareWithReference(t, cumulative, ref, qs)
			compareWithReference(t, interval, stepRef, qs)
			if interval.Unit() != Milliseconds || cumulative.Unit() != Milliseconds {
				t.Errorf("units = %v, %v; want Milliseconds", interval.Unit(), cumulative.Unit())
			}
		})
	}
}

func TestUsed(t *testing.T) {
	h := New(Options{})
	if h.Used() {
		t.Fatal("Used() = true on a new histogram; want false")
	}
	h.Flush()
	if h.Used() {
		t.Fatal("Used() = true after a Flush with nothing recorded; want false")
	}
	interval, cumulative := h.Snapshots()
	if interval.Count() != 0 || cumulative.Count() != 0 {
		t.Errorf("counts before any data = %d, %d; want 0, 0", interval.Count(), cumulative.Count())
	}
	h.Record(7)
	if h.Used() {
		t.Fatal("Used() = true before the Flush that merges the record; want false")
	}
	h.Flush()
	if !h.Used() {
		t.Fatal("Used() = false after a record and a Flush; want true")
	}
	h.Flush()
	if !h.Used() {
		t.Fatal("Used() = false after a later idle Flush; want true")
	}
}

func TestBounds(t *testing.T) {
	shared := []float64{1, 2, 3}
	tests := []struct {
		name string
		opts Options
		want []float64
	}{
		{"default", Options{}, DefaultBuckets()},
		{"sorted kept", Options{Bounds: shared}, []float64{1, 2, 3}},
		{"unsorted sorted", Options{Bounds: []float64{30, 1, 2}}, []float64{1, 2, 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, New(tt.opts).Bounds()); diff != "" {
				t.Errorf("Bounds() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("unsorted input untouched", func(t *testing.T) {
		in := []float64{30, 1, 2}
		New(Options{Bounds: in})
		if diff := cmp.Diff([]float64{30, 1, 2}, in); diff != "" {
			t.Errorf("New modified Options.Bounds (-want +got):\n%s", diff)
		}
	})
	t.Run("DefaultBuckets is a copy", func(t *testing.T) {
		DefaultBuckets()[0] = 99
		if got := DefaultBuckets()[0]; got != 0.5 {
			t.Errorf("DefaultBuckets()[0] = %v after writing to a copy; want 0.5", got)
		}
	})
}

func TestZeroValueHistogram(t *testing.T) {
	var h Histogram
	h.Record(42)
	h.Flush()
	if got := h.Cumulative().Count(); got != 1 {
		t.Errorf("Count() = %d; want 1", got)
	}
	if got := len(h.Bounds()); got != 19 {
		t.Errorf("len(Bounds()) = %d; want 19", got)
	}
}

func TestConcurrentRecordAndFlush(t *testing.T) {
	h := New(Options{})
	const workers, perWorker = 8, 5000
	ref := newRefHist()
	values := make([][]uint64, workers)
	r := rand.New(rand.NewPCG(3, 4))
	for w := range values {
		for range perWorker {
			v := uint64(r.ExpFloat64() * 300)
			if r.IntN(1000) == 0 {
				v = math.MaxUint64 - r.Uint64N(1000) // the unsharded negative side
			}
			values[w] = append(values[w], v)
			ref.record(v)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for _, v := range values[w] {
				h.Record(v)
			}
		})
	}
	// Flush while the workers record; the interval counts must add up to
	// every record exactly once.
	var intervalTotal uint64
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	close(start)
	for flushing := true; flushing; {
		select {
		case <-done:
			flushing = false
		default:
		}
		h.Flush()
		intervalTotal += h.Interval().Count()
	}
	h.Flush()
	intervalTotal += h.Interval().Count()

	if want := uint64(workers * perWorker); intervalTotal != want {
		t.Errorf("sum of interval counts = %d; want %d", intervalTotal, want)
	}
	compareWithReference(t, h.Cumulative(), ref, SupportedQuantiles())
}

func TestRecordDoesNotAllocate(t *testing.T) {
	h := New(Options{})
	values := []uint64{0, 1, 12, 345, 6789, 1 << 40}
	for _, v := range values {
		h.Record(v) // install the shard and decades
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, v := range values {
			h.Record(v)
		}
	})
	if allocs != 0 {
		t.Errorf("Record allocations per run = %v; want 0", allocs)
	}
}

func TestIdleFlushDoesNotAllocate(t *testing.T) {
	t.Run("never recorded", func(t *testing.T) {
		h := New(Options{})
		if allocs := testing.AllocsPerRun(100, h.Flush); allocs != 0 {
			t.Errorf("Flush allocations per run = %v; want 0", allocs)
		}
	})
	t.Run("recorded once", func(t *testing.T) {
		h := New(Options{})
		h.Record(3)
		h.Flush()
		h.Flush() // publish the empty interval
		if allocs := testing.AllocsPerRun(100, h.Flush); allocs != 0 {
			t.Errorf("Flush allocations per run = %v; want 0", allocs)
		}
	})
}

func TestMemoryLayout(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size%64 != 0 {
		t.Errorf("shard size = %d; want a multiple of the 64-byte cache line", size)
	}
	if size := unsafe.Sizeof(Histogram{}); size > 96 {
		t.Errorf("Histogram size = %d; want at most 96 bytes before any record", size)
	}
}

func TestPercentValue(t *testing.T) {
	tests := []struct {
		in   float64
		want uint64
	}{
		{0.25, 250000},
		{1, 1000000},
		{0.0000015, 1},
		{0, 0},
		{-1, 0},
		{math.NaN(), 0},
		{math.Inf(1), math.MaxUint64},
		{1e20, math.MaxUint64},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.in), func(t *testing.T) {
			if got := PercentValue(tt.in); got != tt.want {
				t.Errorf("PercentValue(%v) = %d; want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestUnitString(t *testing.T) {
	tests := []struct {
		unit Unit
		want string
	}{
		{Unspecified, "Unspecified"},
		{Bytes, "Bytes"},
		{Microseconds, "Microseconds"},
		{Milliseconds, "Milliseconds"},
		{Percent, "Percent"},
		{Unit(9), "Unit(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.unit.String(); got != tt.want {
				t.Errorf("String() = %q; want %q", got, tt.want)
			}
		})
	}
}

func FuzzMatchesReference(f *testing.F) {
	f.Add([]byte{200, 0, 44, 1, 44, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 128})
	f.Fuzz(func(t *testing.T, data []byte) {
		h := New(Options{})
		ref := newRefHist()
		// Each value takes 1, 2, 4 or 8 bytes, chosen by the low bits of
		// the first, so that every magnitude is reachable.
		for len(data) > 0 {
			n := 1 << (data[0] & 3)
			if n > len(data) {
				n = len(data)
			}
			var v uint64
			for _, b := range data[:n] {
				v = v<<8 | uint64(b)
			}
			data = data[n:]
			h.Record(v)
			ref.record(v)
		}
		h.Flush()
		compareWithReference(t, h.Cumulative(), ref, SupportedQuantiles())
	})
}

// TestShardsFollowGOMAXPROCS raises GOMAXPROCS after the shard table was made for one P: the
// table grows to a slot per P when a P beyond it records, keeping the shard it had, no two
// shards on one cache line, and Flush counts every value recorded across the growth.
func TestShardsFollowGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	h := New(Options{})
	h.Record(5)
	if n := len(h.table.Load().shards); n != 1 {
		t.Fatalf("a table made with GOMAXPROCS 1 has %d slots; want 1", n)
	}
	first := h.table.Load().shards[0].Load()
	const procs = 4
	runtime.GOMAXPROCS(procs)
	// Goroutines record until the table grew to a slot per P (the runtime starts the idle Ps'
	// threads when goroutines are runnable); bounded, not timed.
	var recorded atomic.Uint64
	recorded.Store(1)
	var wg sync.WaitGroup
	for g := range procs {
		wg.Go(func() {
			for i := 0; i < 1000 || i < 1_000_000 && len(h.table.Load().shards) < procs; i++ {
				h.Record(uint64(10 + g))
				recorded.Add(1)
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	tab := h.table.Load()
	if len(tab.shards) < procs {
		t.Fatalf("after Records on %d Ps the table has %d slots; want one per P", procs, len(tab.shards))
	}
	if tab.shards[0].Load() != first {
		t.Error("P 0's shard was replaced when the table grew")
	}
	lines := map[uintptr]int{}
	for i := range tab.shards {
		s := tab.shards[i].Load()
		if s == nil {
			continue
		}
		for a := uintptr(unsafe.Pointer(s)); a < uintptr(unsafe.Pointer(s))+unsafe.Sizeof(*s); a += 64 {
			if other, ok := lines[a/64]; ok {
				t.Fatalf("the shards of Ps %d and %d share a cache line", other, i)
			}
			lines[a/64] = i
		}
	}
	h.Flush()
	if got, want := h.Cumulative().Count(), recorded.Load(); got != want {
		t.Fatalf("Count() after the growth = %d; want %d", got, want)
	}
}
