package xds

import (
	"context"
	"sort"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/resource"
)

// maxErrorDetail bounds a NACK's error_detail message, as Envoy truncates it (gRPC status
// messages travel in a header).
const maxErrorDetail = 4096

// update is one response for one resource type, independent of the transport.
type update struct {
	version string
	// resources are the resources in the response. In delta responses names[i] is the name
	// of resources[i]; state-of-the-world responses leave names nil.
	resources []*anypb.Any
	names     []string
	// removed are the names a delta response removes.
	removed []string
	// aliases are, in delta responses, the aliases of resources[i] (on-demand VHDS).
	aliases [][]string
	// full is set for state-of-the-world responses: for CDS, clusters not listed are gone.
	full bool
}

// handler consumes the updates of one resource type. Its methods are called on the goroutine of
// the transport that delivers the type, one at a time per transport.
type handler interface {
	// apply applies u and returns the reason to NACK it, or nil to ACK it.
	apply(src *mux, u update) error
	// failed records a transport failure (update_failure).
	failed(src *mux)
}

// watch is the protocol state of one resource type on one transport. Guarded by mux.mu.
type watch struct {
	typeURL  string
	h        handler
	wildcard bool
	names    map[string]struct{}
	// dirty says a request must be sent: the stream is new, names changed, or a response
	// awaits its ACK or NACK.
	dirty bool
	// version is the last accepted version_info (state of the world), nonce the last response's
	// nonce and nack the reason the last response was rejected, nil when it was accepted.
	version string
	nonce   string
	nack    error
	// started is set once a request for the type has gone out on the current stream.
	started bool
	// sent are, for delta streams, the names the server has been told about on this stream.
	sent map[string]struct{}
	// known are, for delta streams, the versions of the resources held (initial_resource_versions).
	known map[string]string
	// added says names were added since the last REST poll went out (see restFetch).
	added bool
	// everSent is set once a subscription with at least one name was sent on the current
	// state-of-the-world stream, after which an empty name list means "none", not wildcard.
	everSent bool
}

// mux is one transport: an ADS stream, a per-type gRPC stream, a REST poller or a watched file.
// It carries the watches of one or more types and is run by one goroutine (Client.Run).
//
// Concurrency: mu guards watches and their state. Handlers run without mu held and may call
// setNames on any mux, which takes that mux's mu and wakes its goroutine.
type mux struct {
	c   *Client
	key string
	src resource.Source
	// api is the transport of gRPC and REST sources (for ADS, the bootstrap's ads_config).
	api *resource.APISource
	ads bool
	// typeURL is the one type of a non-ADS transport.
	typeURL string

	mu      sync.Mutex // guards watches, their state and limiter
	watches map[string]*watch
	limiter *tokenBucket
	wake    chan struct{}
}

func newMux(c *Client, key string, src resource.Source, api *resource.APISource, ads bool) *mux {
	m := &mux{c: c, key: key, src: src, api: api, ads: ads, watches: map[string]*watch{}, wake: make(chan struct{}, 1)}
	if api != nil {
		m.limiter = newTokenBucket(api.RateLimit, c.clock.Now())
	}
	return m
}

// addWatch registers h for typeURL; wildcard subscribes to every resource of the type (CDS).
func (m *mux) addWatch(typeURL string, h handler, wildcard bool) {
	m.mu.Lock()
	if m.watches[typeURL] == nil {
		m.watches[typeURL] = &watch{typeURL: typeURL, h: h, wildcard: wildcard, names: map[string]struct{}{}, dirty: true}
	}
	m.mu.Unlock()
	m.signal()
}

// setNames adds and removes subscribed resource names of typeURL and wakes the transport.
func (m *mux) setNames(typeURL string, add, remove []string) {
	m.mu.Lock()
	w := m.watches[typeURL]
	changed := false
	if w != nil {
		for _, n := range add {
			if _, ok := w.names[n]; !ok {
				w.names[n] = struct{}{}
				changed, w.added = true, true
			}
		}
		for _, n := range remove {
			if _, ok := w.names[n]; ok {
				delete(w.names, n)
				delete(w.known, n)
				changed = true
			}
		}
		w.dirty = w.dirty || changed
	}
	m.mu.Unlock()
	if changed {
		m.signal()
	}
}

func (m *mux) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// run is the transport's goroutine; it returns when ctx ends.
func (m *mux) run(ctx context.Context) {
	switch {
	case m.src.Path != "":
		m.runFile(ctx)
	case m.api.Type == resource.REST:
		m.runREST(ctx)
	default:
		m.runGRPC(ctx)
	}
}

// typeRank orders requests: CDS before EDS, then LDS before RDS, so that on ADS the clusters are known (and warming)
// before their endpoints are asked for, as the xDS protocol's ADS ordering requires.
func typeRank(typeURL string) int {
	switch typeURL {
	case resource.ClusterType:
		return 0
	case resource.EndpointType:
		return 1
	case resource.ListenerType:
		return 2
	case resource.RouteType:
		return 3
	}
	return 4
}

// orderedLocked returns the watches in request order. mu must be held.
func (m *mux) orderedLocked() []*watch {
	out := make([]*watch, 0, len(m.watches))
	for _, w := range m.watches {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := typeRank(out[i].typeURL), typeRank(out[j].typeURL)
		if ri != rj {
			return ri < rj
		}
		return out[i].typeURL < out[j].typeURL
	})
	return out
}

// resetStreamLocked forgets the per-stream state when a new stream starts. mu must be held.
func (m *mux) resetStreamLocked() {
	for _, w := range m.watches {
		w.started, w.everSent, w.sent, w.nonce, w.nack = false, false, nil, "", nil
		w.dirty = true
	}
}

func sortedNames(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// errorDetail is the google.rpc.Status of a NACK.
func errorDetail(err error) *statuspb.Status {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if len(msg) > maxErrorDetail {
		msg = msg[:maxErrorDetail]
	}
	return &statuspb.Status{Code: int32(codes.Internal), Message: msg}
}

// sotwRequestsLocked builds the state-of-the-world requests due, in type order, and marks them
// sent. first says whether nothing has been sent on the stream yet (for the node). mu must be
// held.
func (m *mux) sotwRequestsLocked(first bool) []*discoveryv3.DiscoveryRequest {
	var out []*discoveryv3.DiscoveryRequest
	for _, w := range m.orderedLocked() {
		if !w.dirty {
			continue
		}
		w.dirty = false
		names := sortedNames(w.names)
		if !w.wildcard && len(names) == 0 && !w.everSent && w.nonce == "" {
			continue // nothing to ask for yet; an empty list would mean "everything"
		}
		if len(names) > 0 {
			w.everSent = true
		}
		w.started = true
		req := &discoveryv3.DiscoveryRequest{
			VersionInfo:   w.version,
			ResourceNames: names,
			TypeUrl:       w.typeURL,
			ResponseNonce: w.nonce,
			ErrorDetail:   errorDetail(w.nack),
		}
		if first || !m.api.SetNodeOnFirstMessageOnly {
			req.Node = m.c.node
		}
		first = false
		out = append(out, req)
	}
	return out
}

// deltaRequestsLocked is sotwRequestsLocked for incremental streams: the first request of a
// type carries the whole subscription and initial_resource_versions, later ones the changes.
// ack says which watches owe an ACK or NACK (their nonce is pending). mu must be held.
func (m *mux) deltaRequestsLocked(first bool) []*discoveryv3.DeltaDiscoveryRequest {
	var out []*discoveryv3.DeltaDiscoveryRequest
	for _, w := range m.orderedLocked() {
		if !w.dirty {
			continue
		}
		w.dirty = false
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: w.typeURL, ResponseNonce: w.nonce, ErrorDetail: errorDetail(w.nack)}
		w.nonce, w.nack = "", nil
		if !w.started {
			if !w.wildcard && len(w.names) == 0 {
				continue
			}
			w.started = true
			w.sent = map[string]struct{}{}
			req.ResourceNamesSubscribe = sortedNames(w.names)
			for _, n := range req.ResourceNamesSubscribe {
				w.sent[n] = struct{}{}
			}
			if w.wildcard && len(req.ResourceNamesSubscribe) > 0 {
				// Names next to a wildcard subscription (on-demand VHDS) need an explicit "*".
				req.ResourceNamesSubscribe = append([]string{"*"}, req.ResourceNamesSubscribe...)
			}
			if len(w.known) > 0 {
				req.InitialResourceVersions = make(map[string]string, len(w.known))
				for n, v := range w.known {
					req.InitialResourceVersions[n] = v
				}
			}
		} else if !w.wildcard || len(w.names) > 0 || len(w.sent) > 0 {
			for n := range w.names {
				if _, ok := w.sent[n]; !ok {
					req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
					w.sent[n] = struct{}{}
				}
			}
			for n := range w.sent {
				if _, ok := w.names[n]; !ok {
					req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, n)
					delete(w.sent, n)
				}
			}
			sort.Strings(req.ResourceNamesSubscribe)
			sort.Strings(req.ResourceNamesUnsubscribe)
			if req.ResponseNonce == "" && len(req.ResourceNamesSubscribe) == 0 && len(req.ResourceNamesUnsubscribe) == 0 {
				continue
			}
		} else if req.ResponseNonce == "" {
			continue
		}
		if first || !m.api.SetNodeOnFirstMessageOnly {
			req.Node = m.c.node
		}
		first = false
		out = append(out, req)
	}
	return out
}

// handleSotW applies a state-of-the-world response and records the ACK or NACK to send.
func (m *mux) handleSotW(resp *discoveryv3.DiscoveryResponse) {
	m.mu.Lock()
	w := m.watches[resp.GetTypeUrl()]
	m.mu.Unlock()
	if w == nil {
		m.c.log.Warnf("xds: %s: response for unsubscribed type %s ignored", m.key, resp.GetTypeUrl())
		return
	}
	m.controlPlane(resp.GetControlPlane())
	err := w.h.apply(m, update{version: resp.GetVersionInfo(), resources: resp.GetResources(), full: true})
	m.mu.Lock()
	w.nonce, w.nack, w.dirty = resp.GetNonce(), err, true
	if err == nil {
		w.version = resp.GetVersionInfo()
	}
	m.mu.Unlock()
	m.c.notify(w.typeURL, resp.GetVersionInfo(), err)
}

// handleDelta applies an incremental response and records the ACK or NACK to send.
func (m *mux) handleDelta(resp *discoveryv3.DeltaDiscoveryResponse) {
	m.mu.Lock()
	w := m.watches[resp.GetTypeUrl()]
	m.mu.Unlock()
	if w == nil {
		m.c.log.Warnf("xds: %s: response for unsubscribed type %s ignored", m.key, resp.GetTypeUrl())
		return
	}
	m.controlPlane(resp.GetControlPlane())
	u := update{version: resp.GetSystemVersionInfo(), removed: resp.GetRemovedResources()}
	for _, r := range resp.GetResources() {
		u.resources = append(u.resources, r.GetResource())
		u.names = append(u.names, r.GetName())
		u.aliases = append(u.aliases, r.GetAliases())
	}
	err := w.h.apply(m, u)
	m.mu.Lock()
	w.nonce, w.nack, w.dirty = resp.GetNonce(), err, true
	if err == nil {
		if w.known == nil {
			w.known = map[string]string{}
		}
		for _, r := range resp.GetResources() {
			w.known[r.GetName()] = r.GetVersion()
		}
		for _, n := range resp.GetRemovedResources() {
			delete(w.known, n)
		}
	}
	m.mu.Unlock()
	m.c.notify(w.typeURL, resp.GetSystemVersionInfo(), err)
}

// controlPlane records the control_plane a gRPC response names in control_plane.identifier,
// as Envoy's gRPC muxes do for the types they subscribe to. Responses read from files and
// REST polls do not count (Envoy's filesystem and REST subscriptions ignore the field).
func (m *mux) controlPlane(cp *corev3.ControlPlane) {
	if cp == nil || m.src.Path != "" || m.api == nil || m.api.Type == resource.REST {
		return
	}
	m.c.cpStats.Identifier.Set(cp.GetIdentifier())
}

// failAll reports a transport failure to every watch's handler.
func (m *mux) failAll() {
	m.mu.Lock()
	ws := m.orderedLocked()
	m.mu.Unlock()
	for _, w := range ws {
		w.h.failed(m)
	}
}
