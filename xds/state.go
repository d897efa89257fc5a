package xds

import (
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
)

// failure is the error_state of a rejected resource: Envoy's UpdateFailureState.
type failure struct {
	resource *anypb.Any
	at       time.Time
	details  string
	version  string
}

// serviceKey identifies a subscription to the resource called name on transport m.
func serviceKey(m *mux, name string) string { return m.key + "\x00" + name }

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
