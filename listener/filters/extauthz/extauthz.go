// Package extauthz is Envoy's envoy.filters.network.ext_authz network filter
// (extensions.filters.network.ext_authz.v3.ExtAuthz): a non-terminal filter that asks an
// external authorization service (envoy.service.auth.v3.Authorization/Check over gRPC, on a
// channel dialled through the service's cluster) about each new connection of its filter
// chain before the terminal filter (the TCP proxy) has it. An OK answer lets the connection
// on; a denial closes it; a failed or timed-out call closes it unless failure_mode_allow.
//
// The CheckRequest carries the connection's source and destination addresses (the PROXY
// protocol's when a listener filter read one). Envoy asks with the connection's first bytes;
// Legate asks when the connection is accepted, so a server-first protocol is checked too.
//
// Implemented: stat_prefix, grpc_service (envoy_grpc with authority, initial_metadata and
// timeout, 200 ms by default), failure_mode_allow and transport_api_version V3.
// include_peer_certificate and include_tls_session are accepted on filter chains that do not
// terminate TLS, where Envoy has no certificate or session to send either; on a chain with a
// TLS transport socket they are refused (network filters run before Legate's TLS handshake).
// Refused with "not implemented by Legate": google_grpc, retry policies,
// filter_enabled_metadata, bootstrap_metadata_labels_key, send_tls_alert_on_denial,
// metadata_context_namespaces, typed_metadata_context_namespaces and shadow_mode. The
// service's dynamic metadata is not kept (Legate's connections carry none).
//
// Stats, as Envoy's: ext_authz.<stat_prefix>.total, ok, denied, error, failure_mode_allowed,
// cx_closed, disabled (always 0: filter_enabled_metadata is refused), and the gauge active.
//
// Concurrency: a filter is immutable; the check blocks only the connection's goroutine. The
// filter's gRPC channel is closed with its filter chain.
package extauthz

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	netextauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.ext_authz"

// defaultTimeout is Envoy's check timeout when grpc_service sets none.
const defaultTimeout = 200 * time.Millisecond

// Register registers the filter's parser and factory with the extension registry. The
// chain's Dial reaches the service's cluster (nil: every call fails, and the failure mode
// decides).
func Register(b *registry.Builder) {
	registry.Add(b, config.NetworkFilterConfigs, Name, &netextauthzv3.ExtAuthz{}, parse)
	registry.Add(b, listener.ConnFilters, Name, &netextauthzv3.ExtAuthz{}, func(ctx *listener.ChainContext, cfg any) (listener.ConnFilter, error) {
		return build(ctx, cfg, ctx.Dial)
	})
}

// filterStats are ext_authz.<stat_prefix>.*.
type filterStats struct {
	total, ok, denied, err, failureModeAllowed, cxClosed *stats.Counter
	active                                               *stats.Gauge
}

// filter is one configured network ext_authz filter.
type filter struct {
	allowOnFailure bool
	timeout        time.Duration
	metadata       []string // initial_metadata as key, value pairs
	conn           *grpc.ClientConn
	client         authv3.AuthorizationClient
	stats          filterStats
}

// settings are the filter's configuration as the configuration path converts it.
type settings struct {
	statPrefix         string
	cluster, authority string
	timeout            time.Duration
	metadata           []string
	allowOnFailure     bool
	// peerCertificate and tlsSession are include_peer_certificate and include_tls_session,
	// which only a chain that terminates TLS refuses.
	peerCertificate, tlsSession bool
}

// parse is the filter's config.NetworkFilterParser: a *settings.
func parse(m proto.Message) (any, error) {
	if err := config.Validate(Name, m); err != nil {
		return nil, err
	}
	pb := m.(*netextauthzv3.ExtAuthz)
	if err := refuse(pb); err != nil {
		return nil, err
	}
	gs := pb.GetGrpcService()
	cluster, authority, err := grpcclient.EnvoyGrpc(Name+": grpc_service", gs, nil)
	if err != nil {
		return nil, err
	}
	s := &settings{statPrefix: pb.GetStatPrefix(), cluster: cluster, authority: authority, timeout: defaultTimeout, allowOnFailure: pb.GetFailureModeAllow(),
		peerCertificate: pb.GetIncludePeerCertificate(), tlsSession: pb.GetIncludeTlsSession()}
	if gs.GetTimeout() != nil {
		s.timeout = gs.GetTimeout().AsDuration()
	}
	if s.metadata, err = grpcclient.InitialMetadata(Name+": grpc_service", gs); err != nil {
		return nil, err
	}
	return s, nil
}

// build makes the filter and its channel to the service.
func build(ctx *listener.ChainContext, cfg any, dial grpcclient.Dial) (listener.ConnFilter, error) {
	s, err := listener.ConfigOf[*settings](Name, cfg)
	if err != nil {
		return nil, err
	}
	if err := refuseOnTLS(s, ctx.Chain); err != nil {
		return nil, err
	}
	f := &filter{allowOnFailure: s.allowOnFailure, timeout: s.timeout, metadata: s.metadata}
	if dial == nil {
		dial = func(context.Context, string) (net.Conn, error) { return nil, fmt.Errorf("no upstream dialer") }
	}
	if f.conn, err = grpcclient.New(s.cluster, s.authority, dial); err != nil {
		return nil, fmt.Errorf("%s: grpc_service: %w", Name, err)
	}
	f.client = authv3.NewAuthorizationClient(f.conn)
	p := "ext_authz." + s.statPrefix + "."
	f.stats = filterStats{
		total:              ctx.Stats.Counter(p + "total"),
		ok:                 ctx.Stats.Counter(p + "ok"),
		denied:             ctx.Stats.Counter(p + "denied"),
		err:                ctx.Stats.Counter(p + "error"),
		failureModeAllowed: ctx.Stats.Counter(p + "failure_mode_allowed"),
		cxClosed:           ctx.Stats.Counter(p + "cx_closed"),
		active:             ctx.Stats.Gauge(p+"active", stats.Accumulate),
	}
	ctx.Stats.Counter(p + "disabled") // listed as Envoy lists it
	return f, nil
}

// refuse rejects the fields Legate does not implement but the TLS ones (refuseOnTLS).
func refuse(pb *netextauthzv3.ExtAuthz) error {
	switch pb.GetTransportApiVersion() {
	case corev3.ApiVersion_AUTO, corev3.ApiVersion_V3:
	default:
		return fmt.Errorf("%s: transport_api_version = %v: only V3 is supported", Name, pb.GetTransportApiVersion())
	}
	for _, r := range []struct {
		field string
		set   bool
	}{
		{"filter_enabled_metadata", pb.GetFilterEnabledMetadata() != nil},
		{"bootstrap_metadata_labels_key", pb.GetBootstrapMetadataLabelsKey() != ""},
		{"send_tls_alert_on_denial", pb.GetSendTlsAlertOnDenial()},
		{"metadata_context_namespaces", len(pb.GetMetadataContextNamespaces()) > 0},
		{"typed_metadata_context_namespaces", len(pb.GetTypedMetadataContextNamespaces()) > 0},
		{"shadow_mode", pb.GetShadowMode()},
	} {
		if r.set {
			return fmt.Errorf("%s: %s: not implemented by Legate", Name, r.field)
		}
	}
	return nil
}

// refuseOnTLS rejects include_peer_certificate and include_tls_session on a chain that
// terminates TLS: the network filters run before Legate's handshake, so there is neither to
// send.
func refuseOnTLS(s *settings, chain *config.FilterChain) error {
	if chain == nil || chain.TransportSocket == "" || chain.TransportSocket == rawBuffer {
		return nil
	}
	switch {
	case s.peerCertificate:
		return fmt.Errorf("%s: include_peer_certificate (on a chain that terminates TLS): not implemented by Legate", Name)
	case s.tlsSession:
		return fmt.Errorf("%s: include_tls_session (on a chain that terminates TLS): not implemented by Legate", Name)
	}
	return nil
}

// rawBuffer is the plain transport socket's name.
const rawBuffer = "envoy.transport_sockets.raw_buffer"

// OnConnection asks the service about c and closes it when denied, or when the check failed
// without failure_mode_allow.
func (f *filter) OnConnection(c *listener.Conn) bool {
	f.stats.total.Inc()
	f.stats.active.Inc()
	ok, err := f.check(c)
	f.stats.active.Dec()
	switch {
	case err != nil:
		f.stats.err.Inc()
		if f.allowOnFailure {
			f.stats.failureModeAllowed.Inc()
			return true
		}
	case ok:
		f.stats.ok.Inc()
		return true
	default:
		f.stats.denied.Inc()
	}
	f.stats.cxClosed.Inc()
	return false
}

// check asks the service; ok is the service's verdict when err is nil.
func (f *filter) check(c *listener.Conn) (ok bool, err error) {
	ctx := context.Background()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	if len(f.metadata) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, f.metadata...)
	}
	resp, err := f.client.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      peer(c.RemoteAddr()),
		Destination: peer(c.LocalAddr()),
	}})
	if err != nil {
		return false, err
	}
	return code.Code(resp.GetStatus().GetCode()) == code.Code_OK, nil
}

// peer is a connection end as the CheckRequest names it: its socket address.
func peer(a net.Addr) *authv3.AttributeContext_Peer {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return &authv3.AttributeContext_Peer{}
	}
	return &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ap.Addr().Unmap().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())},
	}}}}
}

// Close closes the channel to the service.
func (f *filter) Close() error { return f.conn.Close() }
