// Package fraction reads envoy.type.v3.FractionalPercent, which routes, access-log filters,
// taps and EDS drop_overloads all take: one conversion of its denominator enum to a number.
package fraction

import typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

// Denominator returns d as a number: 100, 10,000 or 1,000,000. ok is false for a value the
// enum does not define.
func Denominator(d typev3.FractionalPercent_DenominatorType) (n uint64, ok bool) {
	switch d {
	case typev3.FractionalPercent_HUNDRED:
		return 100, true
	case typev3.FractionalPercent_TEN_THOUSAND:
		return 10_000, true
	case typev3.FractionalPercent_MILLION:
		return 1_000_000, true
	}
	return 0, false
}
