package connlimit

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// TestConfig: the limit, prefix and delay are read; runtime_enabled, a missing prefix and a
// zero limit are refused with their names.
func TestConfig(t *testing.T) {
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// newFilter takes pb through the configuration path's parser, then the factory.
	newFilter := func(pb *clv3.ConnectionLimit) (listener.ConnFilter, error) {
		cfg, err := parse(pb)
		if err != nil {
			return nil, err
		}
		return build(&listener.ChainContext{Stats: st}, cfg)
	}
	f, err := newFilter(&clv3.ConnectionLimit{StatPrefix: "p", MaxConnections: wrapperspb.UInt64(7), Delay: durationpb.New(time.Second)})
	if l, ok := f.(*limiter); err != nil || !ok || l.max != 7 || l.delay != time.Second {
		t.Fatalf("build = %+v, %v", f, err)
	}
	for _, tc := range []struct {
		pb   *clv3.ConnectionLimit
		want string
	}{
		{&clv3.ConnectionLimit{StatPrefix: "p", MaxConnections: wrapperspb.UInt64(1), RuntimeEnabled: &corev3.RuntimeFeatureFlag{RuntimeKey: "k"}}, "runtime_enabled: not implemented by Legate"},
		{&clv3.ConnectionLimit{MaxConnections: wrapperspb.UInt64(1)}, "stat_prefix"},
		{&clv3.ConnectionLimit{StatPrefix: "p"}, "max_connections"},
	} {
		if _, err := newFilter(tc.pb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error containing %q", tc.pb, err, tc.want)
		}
	}
}
