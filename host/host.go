package host

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/procpin"
	"github.com/legateproxy/legate/internal/proxyproto"
)

// MaxWeight is the largest endpoint load_balancing_weight, the spec's limit (config refuses
// larger ones with their field path before a host is made).
const MaxWeight = 100

// ErrInvalid is wrapped by every validation error New returns.
var ErrInvalid = errors.New("invalid host")

// Locality is an endpoint's core.Locality. The zero value is the empty locality, which Envoy
// treats as a locality of its own.
type Locality struct {
	Region  string
	Zone    string
	SubZone string
}

// String renders the locality as region/zone/sub_zone, for logs and errors.
func (l Locality) String() string { return l.Region + "/" + l.Zone + "/" + l.SubZone }

// Less orders localities by region, then zone, then sub-zone (Envoy's LocalityLess).
func (l Locality) Less(o Locality) bool {
	if l.Region != o.Region {
		return l.Region < o.Region
	}
	if l.Zone != o.Zone {
		return l.Zone < o.Zone
	}
	return l.SubZone < o.SubZone
}

// Config describes a host to create. Discovery fills it from an LbEndpoint.
type Config struct {
	// Address is the resolved "ip:port" (IPv6 as "[::1]:80"), as Envoy's Address::asString.
	// Required.
	Address string
	// Hostname is the endpoint's hostname (Endpoint.hostname, or the DNS name for STRICT_DNS);
	// may be empty.
	Hostname string
	// Weight is load_balancing_weight, 1..MaxWeight. Zero means the default, 1.
	Weight uint32
	// Locality is the endpoint's locality (from its LocalityLbEndpoints).
	Locality Locality
	// Priority is the priority of its LocalityLbEndpoints; 0 is the highest.
	Priority uint32
	// Metadata holds the endpoint's filter metadata under the "envoy.lb" namespace (Envoy also
	// accepts the older "proxy.lb"), each value stringified: strings as is, numbers in Go's %v
	// form, booleans as "true"/"false". Subset load balancing and the "hash_key" override of
	// consistent hashing read it. New copies the map.
	Metadata map[string]string
	// Canary marks a canary host (envoy.lb metadata "canary": true).
	Canary bool
	// FilterMetadata is the endpoint's whole filter metadata by namespace, for an
	// internal_upstream socket's passthrough_metadata; shared, read only.
	FilterMetadata map[string]*structpb.Struct
	// ProxyProtocolTLVs are the added_tlvs of the endpoint's PerHostConfig (its
	// typed_filter_metadata under envoy.transport_sockets.proxy_protocol), which its
	// connections' PROXY protocol v2 headers carry; shared, read only.
	ProxyProtocolTLVs []proxyproto.TLV
	// SocketMatch is the cluster's transport socket the host's connections use: 0 for the
	// cluster's transport_socket, i for transport_socket_matches[i-1] (the cluster resolves it
	// from the endpoint's metadata). A host whose selection changes is a new host, so its
	// connections never mix sockets.
	SocketMatch int
	// SocketByFilterState, when set, chooses the transport socket of a connection made for a
	// downstream connection that shares filter state objects with it (a cluster whose
	// transport_socket_matcher reads filter state); SocketMatch is the choice without them.
	SocketByFilterState func(shared []filterstate.Entry) int
	// Health is the initial set of health flags (for example PendingActiveHC when active health
	// checking is configured, or FailedEDSHealth from EDS).
	Health HealthFlag
}

// Host is one upstream endpoint.
//
// Identity fields are immutable after New. Health flags, weight and the active request count
// are atomics: Host is safe for concurrent use, and its methods never block or allocate
// (except HealthString).
type Host struct {
	address  string
	hostname string
	locality Locality
	priority uint32
	metadata map[string]string
	canary   bool
	socket   int
	bySocket func(shared []filterstate.Entry) int // Config.SocketByFilterState; nil for none
	filterMD map[string]*structpb.Struct
	ppTLVs   []proxyproto.TLV

	weight atomic.Uint32
	health atomic.Uint32

	// active counts the requests in flight to the host on a line per P (at most
	// maxActiveLines), made by TrackActiveRequests: the pools count a request only once a
	// balancer reads the count (least request), on the line of the P that started it, and
	// take it off that same line when it ends, so each line is the P's own requests in flight.
	// active points at the first line and activeN, the number of lines made then (set before
	// active is published, never changed), so that a pick reaches a P's line from the Host in one step (a table
	// header between them cost a pick over 10,000 hosts a second cache miss per candidate).
	// The lines of Ps from activeN to maxActiveLines, there once GOMAXPROCS rose after the
	// first lines were made (by the program, or by the runtime following a container's CPU
	// limit), are activeExt, made at the first request of such a P: no P beyond the first
	// lines counts on another P's line, and the first lines never move, so a request ends on
	// the line it started on. The statistics /clusters prints per host are cluster.HostStats.
	active    atomic.Pointer[activeLine]
	activeN   atomic.Uint32
	activeExt atomic.Pointer[activeLine]

	// slot is what the cluster's connection pools (package pool, its one user) attach to the
	// host: the host's pool, found by a request in two loads where a map shared by every
	// request hashed the key and walked a trie. Written when a pool is made or dropped, never
	// per request.
	slot atomic.Pointer[Slot]
}

// Slot is a value one owner attached to a host (Attach). Owner tells owners apart: two
// connection pool managers may hold the same host (a cluster's old and new ones across an
// update), and each must find only its own Value.
type Slot struct{ Owner, Value any }

// Attached returns the slot attached last, or nil.
func (h *Host) Attached() *Slot { return h.slot.Load() }

// Attach attaches s in place of any other slot.
func (h *Host) Attach(s *Slot) { h.slot.Store(s) }

// Detach removes s if it is still the one attached.
func (h *Host) Detach(s *Slot) { h.slot.CompareAndSwap(s, nil) }

// maxActiveLines bounds a host's in-flight lines (1 KiB); on more Ps, GOMAXPROCS/maxActiveLines
// of them share a line (4 on 64 cores). The first lines are made for GOMAXPROCS then, the rest
// (the extension) when a P beyond them starts a request.
const maxActiveLines = 16

type activeLine struct {
	n atomic.Int64
	_ [56]byte
}

// activeAt returns line i of the lines starting at first.
func activeAt(first *activeLine, i uint64) *activeLine {
	return (*activeLine)(unsafe.Add(unsafe.Pointer(first), uintptr(i)*unsafe.Sizeof(activeLine{})))
}

// New validates cfg and creates a healthy-or-flagged host.
func New(cfg Config) (*Host, error) {
	if cfg.Address == "" {
		return nil, fmt.Errorf("%w: address = %q; must not be empty", ErrInvalid, cfg.Address)
	}
	w := cfg.Weight
	if w == 0 {
		w = 1
	}
	if w > MaxWeight {
		return nil, fmt.Errorf("%w: %s: load_balancing_weight = %d; must be in 1..%d",
			ErrInvalid, cfg.Address, cfg.Weight, MaxWeight)
	}
	h := &Host{
		address:  cfg.Address,
		hostname: cfg.Hostname,
		locality: cfg.Locality,
		priority: cfg.Priority,
		canary:   cfg.Canary,
		socket:   cfg.SocketMatch,
		bySocket: cfg.SocketByFilterState,
		filterMD: cfg.FilterMetadata,
		ppTLVs:   cfg.ProxyProtocolTLVs,
	}
	if len(cfg.Metadata) > 0 {
		h.metadata = make(map[string]string, len(cfg.Metadata))
		for k, v := range cfg.Metadata {
			h.metadata[k] = v
		}
	}
	h.weight.Store(w)
	h.health.Store(uint32(cfg.Health))
	return h, nil
}

// Address returns the "ip:port" address string.
func (h *Host) Address() string { return h.address }

// Hostname returns the endpoint hostname, possibly empty.
func (h *Host) Hostname() string { return h.hostname }

// Locality returns the endpoint locality.
func (h *Host) Locality() Locality { return h.locality }

// Priority returns the endpoint priority.
func (h *Host) Priority() uint32 { return h.priority }

// SocketMatch returns the transport socket the host's connections use (Config.SocketMatch).
func (h *Host) SocketMatch() int { return h.socket }

// SocketFor returns the transport socket of a connection that carries the shared filter
// state objects: the cluster's matcher's choice over them (Config.SocketByFilterState), else
// SocketMatch.
func (h *Host) SocketFor(shared []filterstate.Entry) int {
	if h.bySocket == nil || len(shared) == 0 {
		return h.socket
	}
	return h.bySocket(shared)
}

// Canary reports whether the host is a canary.
func (h *Host) Canary() bool { return h.canary }

// Metadata returns the stringified envoy.lb metadata value for key.
func (h *Host) Metadata(key string) (string, bool) {
	v, ok := h.metadata[key]
	return v, ok
}

// FilterMetadata returns the namespace ns of the endpoint's filter metadata; nil if absent.
func (h *Host) FilterMetadata(ns string) *structpb.Struct { return h.filterMD[ns] }

// ProxyProtocolTLVs returns the TLVs the host's PROXY protocol v2 headers carry before the
// socket's own (Config.ProxyProtocolTLVs); read only.
func (h *Host) ProxyProtocolTLVs() []proxyproto.TLV { return h.ppTLVs }

// MetadataLen returns the number of envoy.lb metadata keys.
func (h *Host) MetadataLen() int { return len(h.metadata) }

// Weight returns the current load balancing weight (1..MaxWeight).
func (h *Host) Weight() uint32 { return h.weight.Load() }

// SetWeight changes the weight (EDS weight updates keep the host identity). w must be in
// 1..MaxWeight, as config validated it; other values are ignored rather than clamped, so no
// weight differs silently from the one configured. Balancers read weights when a snapshot is
// built.
func (h *Host) SetWeight(w uint32) {
	if w >= 1 && w <= MaxWeight {
		h.weight.Store(w)
	}
}

// HealthFlags returns the current flag set.
func (h *Host) HealthFlags() HealthFlag { return HealthFlag(h.health.Load()) }

// HasHealthFlag reports whether any of the given flags is set.
func (h *Host) HasHealthFlag(f HealthFlag) bool { return h.HealthFlags()&f != 0 }

// SetHealthFlag sets the given flags and returns the previous flag set.
func (h *Host) SetHealthFlag(f HealthFlag) HealthFlag {
	return HealthFlag(h.health.Or(uint32(f)))
}

// ClearHealthFlag clears the given flags and returns the previous flag set.
func (h *Host) ClearHealthFlag(f HealthFlag) HealthFlag {
	return HealthFlag(h.health.And(^uint32(f)))
}

// Health returns the coarse health computed from the current flags.
func (h *Host) Health() Health { return h.HealthFlags().Coarse() }

// Healthy reports whether no failure flag and no degraded flag is set.
func (h *Host) Healthy() bool { return h.Health() == Healthy }

// Degraded reports whether the host is degraded (and not unhealthy).
func (h *Host) Degraded() bool { return h.Health() == Degraded }

// Excluded reports whether the host is excluded from load balancing.
func (h *Host) Excluded() bool { return h.HealthFlags().Excluded() }

// HealthString renders the health flags as /clusters prints them ("healthy" or
// "/failed_active_hc/…").
func (h *Host) HealthString() string { return h.HealthFlags().String() }

// ActiveRequests returns the number of requests in flight to the host, once
// TrackActiveRequests was called (0 before): the sum of every P's line.
func (h *Host) ActiveRequests() int64 {
	first := h.active.Load()
	if first == nil {
		return 0
	}
	var n int64
	lines := uint64(h.activeN.Load())
	for i := range lines {
		n += activeAt(first, i).n.Load()
	}
	if ext := h.activeExt.Load(); ext != nil {
		for i := range maxActiveLines - lines {
			n += activeAt(ext, i).n.Load()
		}
	}
	return n
}

// ActiveRequestsOn returns the requests in flight to the host that P p started (p from
// procpin.Pin): what a balancer running on p reads to weigh the host, without touching a line
// another P writes.
func (h *Host) ActiveRequestsOn(p int) int64 {
	first := h.active.Load()
	if first == nil {
		return 0
	}
	n, i := uint64(h.activeN.Load()), lineIndex(p)
	if i < n {
		return activeAt(first, i).n.Load()
	}
	if ext := h.activeExt.Load(); ext != nil {
		return activeAt(ext, i-n).n.Load()
	}
	return 0
}

// ActiveLines is a handle on a host's per-P in-flight counts: what ActiveRequestsOn reads,
// without loading the Host. A balancer that weighs many hosts keeps the handles of its
// snapshot's hosts side by side, so that a candidate costs one line of memory, its count,
// where going through the Host costs two (10,000 hosts: 52 ns a pick against 32 ns before
// the counts moved off the Host, issue 22).
type ActiveLines struct {
	first *activeLine
	n     uint64
	host  *Host // for a P beyond the first lines (GOMAXPROCS rose since they were made)
}

// Lines returns h's handle, making the lines as TrackActiveRequests does.
func (h *Host) Lines() ActiveLines {
	first := h.activeLines()
	return ActiveLines{first: first, n: uint64(h.activeN.Load()), host: h}
}

// On returns the requests in flight to the host that P p started, as ActiveRequestsOn.
func (a ActiveLines) On(p int) int64 {
	first, i := a.first, uint64(p)
	if i >= a.n {
		// lineIndex(p), beyond the first lines: on the extension, if made.
		if i &= maxActiveLines - 1; i >= a.n {
			if first, i = a.host.activeExt.Load(), i-a.n; first == nil {
				return 0
			}
		}
	}
	return activeAt(first, i).n.Load()
}

// TrackActiveRequests makes the pools count the host's requests in flight from now on. A
// balancer that reads ActiveRequests calls it on its hosts when it is built, before any of its
// picks can return them.
func (h *Host) TrackActiveRequests() { h.activeLines() }

// activeLines returns the first line, making the lines on the first call.
func (h *Host) activeLines() *activeLine {
	if first := h.active.Load(); first != nil {
		return first
	}
	// The first caller fixes the number of lines, so that racing callers, even across a
	// GOMAXPROCS change, publish a table of that size.
	h.activeN.CompareAndSwap(0, uint32(min(procpin.Slots(), maxActiveLines)))
	lines := make([]activeLine, h.activeN.Load())
	h.active.CompareAndSwap(nil, &lines[0])
	return h.active.Load()
}

// lineIndex maps P p to its line's index; on more Ps than maxActiveLines, several share one.
func lineIndex(p int) uint64 {
	i := uint64(p)
	if i >= maxActiveLines {
		i &= maxActiveLines - 1
	}
	return i
}

// lineFor returns line i of the lines starting at first, n of them, or of the extension beyond
// them, making the extension if there is none yet (it allocates: not while pinned).
func (h *Host) lineFor(first *activeLine, n, i uint64) *activeLine {
	if i < n {
		return activeAt(first, i)
	}
	ext := h.activeExt.Load()
	if ext == nil {
		lines := make([]activeLine, maxActiveLines-n)
		h.activeExt.CompareAndSwap(nil, &lines[0])
		ext = h.activeExt.Load()
	}
	return activeAt(ext, i-n)
}

// ActiveRequestStarted counts a request in flight on the calling P's line and returns the token
// to pass to ActiveRequestEnded, or 0 when the host's requests are not tracked.
func (h *Host) ActiveRequestStarted() uint8 {
	first := h.active.Load()
	if first == nil {
		return 0
	}
	n, i := uint64(h.activeN.Load()), uint64(procpin.Pin())
	if i < n {
		activeAt(first, i).n.Add(1)
		procpin.Unpin()
		return uint8(i + 1)
	}
	procpin.Unpin()
	i = lineIndex(int(i))
	h.lineFor(first, n, i).n.Add(1)
	return uint8(i + 1)
}

// ActiveRequestEnded takes the request ActiveRequestStarted counted off the line it was counted
// on (whichever P it ends on); token 0 does nothing.
func (h *Host) ActiveRequestEnded(token uint8) {
	if token != 0 {
		first, i := h.active.Load(), uint64(token-1)
		if n := uint64(h.activeN.Load()); i >= n {
			first, i = h.activeExt.Load(), i-n // made by the request's start
		}
		activeAt(first, i).n.Add(-1)
	}
}

// AddActiveRequests adds delta to the calling P's line, tracking the host's requests from now
// on (for tests that load a host by hand; the pools use ActiveRequestStarted).
func (h *Host) AddActiveRequests(delta int64) {
	first := h.activeLines()
	i := lineIndex(procpin.Pin())
	procpin.Unpin()
	h.lineFor(first, uint64(h.activeN.Load()), i).n.Add(delta)
}

// String returns the address, for logs.
func (h *Host) String() string { return h.address }
