package filter

import (
	"fmt"
	"math/rand/v2"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/legateproxy/legate/internal/fraction"
)

// Fraction is a compiled RuntimeFractionalPercent (or a FractionalPercent with a runtime key):
// a default fraction the runtime may override under Key.
type Fraction struct {
	Key                    string
	Numerator, Denominator uint64
}

// Always is the fraction that is always on (100%).
var Always = Fraction{Numerator: 100, Denominator: 100}

// FractionFromProto compiles a RuntimeFractionalPercent; nil gives def. path names the field
// in errors.
func FractionFromProto(p *corev3.RuntimeFractionalPercent, def Fraction, path string) (Fraction, error) {
	if p == nil {
		return def, nil
	}
	f, err := PercentFromProto(p.GetDefaultValue(), path+".default_value")
	f.Key = p.GetRuntimeKey()
	return f, err
}

// PercentFromProto compiles a FractionalPercent (nil is 0%).
func PercentFromProto(p *typev3.FractionalPercent, path string) (Fraction, error) {
	if p == nil {
		return Fraction{Denominator: 100}, nil
	}
	d, ok := fraction.Denominator(p.GetDenominator())
	if !ok {
		return Fraction{}, fmt.Errorf("%s.denominator: %v is not a known denominator", path, p.GetDenominator())
	}
	return Fraction{Numerator: uint64(p.GetNumerator()), Denominator: d}, nil
}

// Enabled draws a random value and decides the fraction with it through ctx's runtime, as
// Envoy's featureEnabled(runtime_key, default_value).
func (f Fraction) Enabled(ctx *Context) bool {
	if f.Key == "" && f.Numerator >= f.Denominator {
		return true // always on: no draw
	}
	return ctx.FractionEnabled(f.Key, f.Numerator, f.Denominator, rand.Uint64())
}
