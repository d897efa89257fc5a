package originaldst

import (
	"errors"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

func TestPick(t *testing.T) {
	hs := lbtest.Hosts(t, 3)
	hs[2].SetHealthFlag(host.FailedActiveHC)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hs)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ctx     *lb.Context
		want    *host.Host
		wantErr error
	}{
		{"known address", &lb.Context{OverrideHost: hs[1].Address()}, hs[1], nil},
		{"health ignored", &lb.Context{OverrideHost: hs[2].Address()}, hs[2], nil},
		{"unknown address", &lb.Context{OverrideHost: "192.0.2.1:80"}, nil, ErrUnknownDestination},
		{"no address", &lb.Context{}, nil, ErrNoDestination},
		{"nil context", nil, nil, ErrNoDestination},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.Pick(tc.ctx)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("Pick() = %v, %v; want %v, %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !errors.Is(err, lb.ErrNoHealthyHost) {
				t.Errorf("Pick() error %v does not wrap lb.ErrNoHealthyHost", err)
			}
		})
	}
	lbtest.NoAllocs(t, b, &lb.Context{OverrideHost: hs[0].Address()})
}

func BenchmarkPick(b *testing.B) {
	lbtest.BenchPick(b, func(p lb.Params) (lb.Balancer, error) { return New(p, nil) },
		func() *lb.Context { return &lb.Context{OverrideHost: "10.0.0.5:80"} })
}
