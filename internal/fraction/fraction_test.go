package fraction

import (
	"testing"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

func TestDenominator(t *testing.T) {
	tests := []struct {
		d    typev3.FractionalPercent_DenominatorType
		n    uint64
		okay bool
	}{
		{typev3.FractionalPercent_HUNDRED, 100, true},
		{typev3.FractionalPercent_TEN_THOUSAND, 10_000, true},
		{typev3.FractionalPercent_MILLION, 1_000_000, true},
		{typev3.FractionalPercent_DenominatorType(7), 0, false},
	}
	for _, tt := range tests {
		if n, ok := Denominator(tt.d); n != tt.n || ok != tt.okay {
			t.Errorf("Denominator(%v) = %d, %v; want %d, %v", tt.d, n, ok, tt.n, tt.okay)
		}
	}
}
