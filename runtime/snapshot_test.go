package runtime

import "testing"

// TestDenominatorOf checks that DenominatorOf inverts Value.
func TestDenominatorOf(t *testing.T) {
	for _, d := range []Denominator{Hundred, TenThousand, Million} {
		if got := DenominatorOf(d.Value()); got != d {
			t.Errorf("DenominatorOf(%d) = %v; want %v", d.Value(), got, d)
		}
	}
	if got := DenominatorOf(7); got != Hundred {
		t.Errorf("DenominatorOf(7) = %v; want Hundred", got)
	}
}
