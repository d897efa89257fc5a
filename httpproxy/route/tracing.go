package route

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/legateproxy/legate/internal/fraction"
	"github.com/legateproxy/legate/tracing"
)

// Decorator is route.decorator: the operation that names the span of the requests the route
// takes, and whether it is passed on in x-envoy-decorator-operation (Propagate, default true).
type Decorator struct {
	Operation string
	Propagate bool
}

// Tracing is route.tracing: when a route has it, its three sampling fractions replace the
// connection manager's (each defaulting to 100 %, as in Envoy) and its custom tags are added
// to the span, over the connection manager's of the same name.
type Tracing struct {
	Sampling tracing.Sampling
	Tags     []tracing.CustomTag
}

// compileDecorator converts route.decorator; operation is required by the proto's rules.
func compileDecorator(p *routev3.Decorator) *Decorator {
	if p == nil {
		return nil
	}
	return &Decorator{Operation: p.GetOperation(), Propagate: p.GetPropagate() == nil || p.GetPropagate().GetValue()}
}

// compileTracing converts route.tracing; path names it in errors.
func compileTracing(p *routev3.Tracing, path string) (*Tracing, error) {
	if p == nil {
		return nil, nil
	}
	t := &Tracing{Sampling: tracing.Sampling{
		Client:  tenThousandths(p.GetClientSampling()),
		Random:  tenThousandths(p.GetRandomSampling()),
		Overall: tenThousandths(p.GetOverallSampling()),
	}}
	for i, ct := range p.GetCustomTags() {
		tag, err := tracing.CustomTagFromProto(fmt.Sprintf("%s.custom_tags[%d]", path, i), ct)
		if err != nil {
			return nil, err
		}
		t.Tags = append(t.Tags, tag)
	}
	return t, nil
}

// tenThousandths converts a route tracing FractionalPercent (unset: 100 %) to a numerator out
// of 10000, the connection manager's sampling unit.
func tenThousandths(f *typev3.FractionalPercent) uint64 {
	if f == nil {
		return 10000
	}
	den, ok := fraction.Denominator(f.GetDenominator())
	if !ok {
		den = 100
	}
	return min(10000, (uint64(f.GetNumerator())*10000+den/2)/den)
}
