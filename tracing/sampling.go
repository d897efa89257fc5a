package tracing

// Reason is why a request is traced, as Envoy's UUID request id records it in the version
// nibble (the 15th character) of x-request-id.
type Reason uint8

const (
	NotTraceable Reason = iota
	Sampled
	ServiceForced
	ClientForced
)

// The nibbles Envoy's UUID request id extension writes for each reason.
const (
	nibbleNone    = '4'
	nibbleSampled = '9'
	nibbleForced  = 'a'
	nibbleClient  = 'b'
)

// ReasonOf reads the trace reason of a UUID x-request-id; any other id is not traceable.
func ReasonOf(id string) Reason {
	if len(id) != 36 {
		return NotTraceable
	}
	switch id[14] {
	case nibbleSampled:
		return Sampled
	case nibbleForced:
		return ServiceForced
	case nibbleClient:
		return ClientForced
	}
	return NotTraceable
}

// Nibble is the request id character recording r.
func (r Reason) Nibble() byte {
	switch r {
	case Sampled:
		return nibbleSampled
	case ServiceForced:
		return nibbleForced
	case ClientForced:
		return nibbleClient
	}
	return nibbleNone
}

// idInteger is Envoy's integer of a UUID request id: its first 8 hex digits. ok is false for
// an id that does not start with them (such requests are not traced, as in Envoy).
func idInteger(id string) (v uint64, ok bool) {
	if len(id) < 8 {
		return 0, false
	}
	for i := range 8 {
		c := id[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// Request is what the sampling decision reads from a request.
type Request struct {
	RequestID     string
	ClientTraceID bool // x-client-trace-id is present
	ForceTrace    bool // x-envoy-force-trace on an internal request
	// Route is the request's route's sampling (route.tracing), which replaces the connection
	// manager's; nil for none.
	Route *Sampling
}

// Decide makes Envoy's sampling decision: a reason already in the request id stands;
// otherwise x-client-trace-id under client_sampling, then x-envoy-force-trace, then
// random_sampling of the id's integer; overall_sampling of the same integer last. changed
// says the request id must be rewritten with the reason's nibble.
func (c *Config) Decide(r Request, st *HCMStats) (reason Reason, changed bool) {
	v, ok := idInteger(r.RequestID)
	if !ok || len(r.RequestID) != 36 {
		st.NotTraceable.Inc()
		return NotTraceable, false
	}
	v %= 10000
	sm := &c.Sampling
	if r.Route != nil {
		sm = r.Route
	}
	reason = ReasonOf(r.RequestID)
	if reason == NotTraceable {
		switch {
		case r.ClientTraceID && c.enabled("tracing.client_enabled", sm.Client, v):
			reason, changed = ClientForced, true
		case r.ForceTrace:
			reason, changed = ServiceForced, true
		case c.enabled("tracing.random_sampling", sm.Random, v):
			reason, changed = Sampled, true
		}
	}
	if reason != NotTraceable && !c.enabled("tracing.global_enabled", sm.Overall, v) {
		reason, changed = NotTraceable, ReasonOf(r.RequestID) != NotTraceable
	}
	switch reason {
	case NotTraceable:
		st.NotTraceable.Inc()
	case Sampled:
		st.RandomSampling.Inc()
	case ServiceForced:
		st.ServiceForced.Inc()
	case ClientForced:
		st.ClientEnabled.Inc()
	}
	return reason, changed
}

// enabled is Envoy's featureEnabled with a default numerator out of 10000 and the request's
// value v in [0, 10000).
func (c *Config) enabled(key string, def, v uint64) bool {
	n := def
	if c.Runtime != nil {
		n = c.Runtime(key, def)
	}
	return v < n
}
