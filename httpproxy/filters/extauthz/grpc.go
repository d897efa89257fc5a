package extauthz

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/pool"
)

// grpcChecker asks an envoy.service.auth.v3.Authorization service over one gRPC channel,
// dialled through the service's cluster (without pools every check fails, as a service that
// cannot be reached).
type grpcChecker struct {
	t      grpcTarget
	set    *settings
	conn   *grpc.ClientConn
	client authv3.AuthorizationClient
}

func newGRPCChecker(t grpcTarget, set *settings, pools *pool.Registry) (*grpcChecker, error) {
	conn, err := grpc.NewClient("passthrough:///"+t.cluster,
		grpc.WithTransportCredentials(insecure.NewCredentials()), // the cluster's dialer does TLS
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return filter.Dial(ctx, pools, t.cluster)
		}),
		grpc.WithAuthority(t.authority))
	if err != nil {
		return nil, fmt.Errorf("%s: grpc_service: cluster %q: %w", Name, t.cluster, err)
	}
	return &grpcChecker{t: t, set: set, conn: conn, client: authv3.NewAuthorizationClient(conn)}, nil
}

func (g *grpcChecker) close() error { return g.conn.Close() }

func (g *grpcChecker) check(ctx context.Context, x *filter.Exchange, in *input) result {
	ctx, cancel := context.WithTimeout(ctx, g.t.timeout)
	defer cancel()
	if len(g.t.metadata) > 0 {
		kv := make([]string, 0, 2*len(g.t.metadata))
		for _, m := range g.t.metadata {
			kv = append(kv, m[0], m[1])
		}
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	resp, err := g.client.Check(ctx, checkRequest(x, in, g.set))
	if err != nil {
		return result{outcome: failed, err: err}
	}
	return fromCheckResponse(resp)
}

// checkRequest builds the CheckRequest Envoy sends for the request.
func checkRequest(x *filter.Exchange, in *input, set *settings) *authv3.CheckRequest {
	r := x.Request
	hr := &authv3.AttributeContext_HttpRequest{
		Id:      r.Header.Get("X-Request-Id"),
		Method:  r.Method,
		Host:    r.Authority,
		Scheme:  r.Scheme,
		Headers: map[string]string{},
		Size:    -1,
	}
	hr.Path = r.Path
	if _, q, ok := strings.Cut(r.Path, "?"); ok {
		hr.Query = q
	}
	if cl := r.Header.Get("Content-Length"); cl != "" {
		fmt.Sscan(cl, &hr.Size)
	}
	addHeader := func(name, value string) {
		if set.allowed != nil && !set.allowed.match(name) {
			return
		}
		if set.disallowed != nil && set.disallowed.match(name) {
			return
		}
		if old, ok := hr.Headers[name]; ok {
			value = old + "," + value
		}
		hr.Headers[name] = value
	}
	addHeader(":authority", r.Authority)
	addHeader(":method", r.Method)
	addHeader(":path", r.Path)
	if r.Scheme != "" {
		addHeader(":scheme", r.Scheme)
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			addHeader(strings.ToLower(k), v)
		}
	}
	if in.body != nil {
		if set.packAsBytes {
			hr.RawBody = in.body
		} else {
			hr.Body = string(in.body)
		}
	}
	conn := x.Connection()
	ac := &authv3.AttributeContext{
		Source:            &authv3.AttributeContext_Peer{Address: socketAddress(conn.Remote.Addr().String(), uint32(conn.Remote.Port()))},
		Destination:       &authv3.AttributeContext_Peer{Address: socketAddress(conn.Local.Addr().String(), uint32(conn.Local.Port()))},
		Request:           &authv3.AttributeContext_Request{Time: timestamppb.Now(), Http: hr},
		ContextExtensions: in.extensions,
	}
	if !conn.Remote.IsValid() {
		ac.Source = &authv3.AttributeContext_Peer{}
	}
	if !conn.Local.IsValid() {
		ac.Destination = &authv3.AttributeContext_Peer{}
	}
	if t := conn.TLS; t != nil {
		if set.includeTLSSession {
			ac.TlsSession = &authv3.AttributeContext_TLSSession{Sni: t.ServerName}
		}
		if set.includePeerCert && len(t.PeerCertificates) > 0 {
			// Envoy sends the peer certificate URL-encoded in PEM.
			p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: t.PeerCertificates[0].Raw})
			ac.Source.Certificate = url.QueryEscape(string(p))
		}
		if len(t.PeerCertificates) > 0 {
			c := t.PeerCertificates[0]
			switch {
			case len(c.URIs) > 0:
				ac.Source.Principal = c.URIs[0].String()
			case len(c.DNSNames) > 0:
				ac.Source.Principal = c.DNSNames[0]
			default:
				ac.Source.Principal = c.Subject.String()
			}
		}
	}
	if len(set.metadataNamespaces) > 0 && x.Metadata != nil {
		md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
		for _, ns := range set.metadataNamespaces {
			if st, ok := x.Metadata[ns]; ok {
				md.FilterMetadata[ns] = st
			}
		}
		ac.MetadataContext = md
	}
	return &authv3.CheckRequest{Attributes: ac}
}

func socketAddress(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// fromCheckResponse reads the service's answer: status OK allows; anything else denies, with
// the denied_response's status (403 when unset), headers and body.
func fromCheckResponse(resp *authv3.CheckResponse) result {
	if code.Code(resp.GetStatus().GetCode()) == code.Code_OK {
		ok := resp.GetOkResponse()
		r := result{outcome: allowed, metadata: resp.GetDynamicMetadata(), remove: ok.GetHeadersToRemove(),
			queryToRemove: ok.GetQueryParametersToRemove()}
		if r.metadata == nil {
			r.metadata = ok.GetDynamicMetadata()
		}
		for _, h := range ok.GetHeaders() {
			r.upstream = append(r.upstream, fromOption(h))
		}
		for _, h := range ok.GetResponseHeadersToAdd() {
			r.responseAdd = append(r.responseAdd, fromOption(h))
		}
		for _, q := range ok.GetQueryParametersToSet() {
			r.queryToSet = append(r.queryToSet, [2]string{q.GetKey(), q.GetValue()})
		}
		return r
	}
	d := resp.GetDeniedResponse()
	r := result{outcome: denied, status: int(d.GetStatus().GetCode()), body: d.GetBody()}
	if r.status < 100 || r.status > 599 {
		r.status = http.StatusForbidden
	}
	if len(d.GetHeaders()) > 0 {
		r.reply = http.Header{}
		for _, h := range d.GetHeaders() {
			applyHeader(r.reply, fromOption(h))
		}
	}
	return r
}

// fromOption turns a HeaderValueOption into a header operation: append (the deprecated
// BoolValue) or append_action; with neither set Envoy's ext_authz replaces the header.
func fromOption(h *corev3.HeaderValueOption) header {
	v := h.GetHeader().GetValue()
	if v == "" {
		v = string(h.GetHeader().GetRawValue())
	}
	op := header{name: h.GetHeader().GetKey(), value: v}
	if h.GetAppend() != nil {
		op.append = h.GetAppend().GetValue()
		return op
	}
	switch h.GetAppendAction() {
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		op.ifAbsent = true
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		op.ifPresent = true
	}
	return op
}
