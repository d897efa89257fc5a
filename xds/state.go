package xds

import (
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
