package localratelimit

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/headermatch"
)

// entry is one descriptor entry (key, value).
type entry struct{ key, value string }

// actionKind is a rate limit action Legate implements.
type actionKind uint8

const (
	actGenericKey actionKind = iota
	actRequestHeaders
	actRemoteAddress
	actDestinationCluster
	actSourceCluster
	actHeaderValueMatch
)

// action is one compiled RateLimit.Action: it adds one entry to the request's descriptor, or
// fails it (the descriptor is then not produced, as Envoy).
type action struct {
	kind        actionKind
	key, value  string // descriptor key, and the generic or header_value_match value
	header      string // request_headers: canonical header name
	skipAbsent  bool
	expectMatch bool
	headers     []headermatch.Header
}

// rateLimit is one RateLimit entry: its actions make one descriptor.
type rateLimit struct{ actions []action }

// compileRateLimits compiles the filter's rate_limits of its stage.
func compileRateLimits(in []*routev3.RateLimit, stage uint32, path string) ([]rateLimit, error) {
	var out []rateLimit
	for i, rl := range in {
		p := fmt.Sprintf("%s[%d]", path, i)
		if err := refuseRateLimitOptions(rl, p); err != nil {
			return nil, err
		}
		if rl.GetStage().GetValue() != stage {
			continue
		}
		var r rateLimit
		for j, a := range rl.GetActions() {
			act, err := compileAction(a, fmt.Sprintf("%s.actions[%d]", p, j))
			if err != nil {
				return nil, err
			}
			r.actions = append(r.actions, act)
		}
		out = append(out, r)
	}
	return out, nil
}

func refuseRateLimitOptions(rl *routev3.RateLimit, path string) error {
	switch {
	case rl.GetLimit() != nil:
		return fmt.Errorf("%s.limit: not implemented by Legate", path)
	case rl.GetHitsAddend() != nil:
		return fmt.Errorf("%s.hits_addend: not implemented by Legate", path)
	case rl.GetApplyOnStreamDone():
		return fmt.Errorf("%s.apply_on_stream_done: not implemented by Legate", path)
	case rl.GetDisableKey() != "":
		return fmt.Errorf("%s.disable_key: not implemented by Legate", path)
	case rl.GetXRatelimitOption() != routev3.RateLimit_UNSPECIFIED:
		return fmt.Errorf("%s.x_ratelimit_option: not implemented by Legate", path)
	}
	return nil
}

func compileAction(a *routev3.RateLimit_Action, path string) (action, error) {
	switch s := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_GenericKey_:
		return action{kind: actGenericKey, key: orDefault(s.GenericKey.GetDescriptorKey(), "generic_key"), value: s.GenericKey.GetDescriptorValue()}, nil
	case *routev3.RateLimit_Action_RequestHeaders_:
		h := s.RequestHeaders
		return action{kind: actRequestHeaders, key: h.GetDescriptorKey(), header: headermatch.Key(h.GetHeaderName()), skipAbsent: h.GetSkipIfAbsent()}, nil
	case *routev3.RateLimit_Action_RemoteAddress_:
		return action{kind: actRemoteAddress, key: "remote_address"}, nil
	case *routev3.RateLimit_Action_DestinationCluster_:
		return action{kind: actDestinationCluster, key: "destination_cluster"}, nil
	case *routev3.RateLimit_Action_SourceCluster_:
		return action{kind: actSourceCluster, key: "source_cluster"}, nil
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		m := s.HeaderValueMatch
		act := action{kind: actHeaderValueMatch, key: orDefault(m.GetDescriptorKey(), "header_match"), value: m.GetDescriptorValue(), expectMatch: m.GetExpectMatch() == nil || m.GetExpectMatch().GetValue()}
		for i, h := range m.GetHeaders() {
			hm, err := headermatch.CompileHeader(h, fmt.Sprintf("%s.header_value_match.headers[%d]", path, i))
			if err != nil {
				return action{}, err
			}
			act.headers = append(act.headers, hm)
		}
		return act, nil
	}
	return action{}, fmt.Errorf("%s: %T: not implemented by Legate", path, a.GetActionSpecifier())
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// descriptor makes the rate limit's descriptor for a request into dst; ok is false when an
// action fails it.
func (r *rateLimit) descriptor(x *filter.Exchange, m *route.Match, localCluster string, dst []entry) (_ []entry, ok bool) {
	for i := range r.actions {
		a := &r.actions[i]
		var v string
		switch a.kind {
		case actGenericKey:
			v = a.value
		case actRequestHeaders:
			hv, present := headermatch.Value(x.Request.Header[a.header])
			switch {
			case present:
				v = hv
			case a.skipAbsent:
				continue
			default:
				return dst, false
			}
		case actRemoteAddress:
			if x.ClientIP == "" {
				return dst, false
			}
			v = x.ClientIP
		case actDestinationCluster:
			if m == nil || m.Cluster == "" {
				return dst, false
			}
			v = m.Cluster
		case actSourceCluster:
			v = localCluster
		case actHeaderValueMatch:
			if a.headersMatch(x.Request) != a.expectMatch {
				return dst, false
			}
			v = a.value
		}
		dst = append(dst, entry{a.key, v})
	}
	return dst, true
}

// headersMatch reports whether every header matcher matches the request.
func (a *action) headersMatch(req *route.Request) bool {
	for i := range a.headers {
		h := &a.headers[i]
		if !h.Match(req.HeaderValue(h.Key())) {
			return false
		}
	}
	return true
}
