package config

import (
	"fmt"
	"strings"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/legateproxy/legate/accesslog"
)

// DefaultTunnelPostPath is tunneling_config.post_path when use_post is set without one.
const DefaultTunnelPostPath = "/"

// TCPTunnel is TcpProxy.tunneling_config: each downstream connection is carried in an HTTP
// request (CONNECT, or POST with UsePost) to the cluster, over HTTP/1.1 or HTTP/2 as the
// cluster's protocol options say.
type TCPTunnel struct {
	// Hostname is hostname, a format string: the request's authority (the CONNECT target).
	Hostname *accesslog.Formatter
	// UsePost is use_post: the tunnel is a POST to PostPath instead of a CONNECT.
	UsePost bool
	// PostPath is post_path ("/" by default); only with UsePost.
	PostPath string
	// Headers are headers_to_add, their values format strings, in order.
	Headers []TunnelHeader
	// PropagateResponseHeaders and PropagateResponseTrailers are propagate_response_headers
	// and propagate_response_trailers: the answer's headers (trailers) go in the downstream
	// connection's filter state, under envoy.tcp_proxy.propagate_response_headers
	// (_trailers), where access logs read them.
	PropagateResponseHeaders, PropagateResponseTrailers bool
}

// TunnelHeader is one entry of tunneling_config.headers_to_add.
type TunnelHeader struct {
	// Key is the header name, lower case.
	Key string
	// Value is the header value, a format string.
	Value *accesslog.Formatter
	// Action is the entry's append action.
	Action HeaderAppend
	// KeepEmptyValue adds the header even when its value formats to "".
	KeepEmptyValue bool
}

// tunnelFromProto converts tunneling_config. Request ids and formatters are refused.
func tunnelFromProto(t *tcpproxyv3.TcpProxy_TunnelingConfig) (*TCPTunnel, error) {
	const path = "tunneling_config"
	if t.GetHostname() == "" {
		return nil, fmt.Errorf("%s.hostname = \"\"; must not be empty", path)
	}
	for _, u := range []struct {
		name string
		set  bool
	}{
		{"request_id_extension", t.GetRequestIdExtension() != nil},
		{"request_id_header", t.GetRequestIdHeader() != ""},
		{"request_id_metadata_key", t.GetRequestIdMetadataKey() != ""},
		{"formatters", len(t.GetFormatters()) > 0},
	} {
		if u.set {
			return nil, fmt.Errorf("%s.%s is set; not implemented by Legate", path, u.name)
		}
	}
	if t.GetPostPath() != "" && !t.GetUsePost() {
		return nil, fmt.Errorf("%s.post_path = %q without use_post; post_path needs use_post", path, t.GetPostPath())
	}
	out := &TCPTunnel{UsePost: t.GetUsePost(), PropagateResponseHeaders: t.GetPropagateResponseHeaders(),
		PropagateResponseTrailers: t.GetPropagateResponseTrailers()}
	if out.UsePost {
		out.PostPath = DefaultTunnelPostPath
		if p := t.GetPostPath(); p != "" {
			if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t\r\n\x00") {
				return nil, fmt.Errorf("%s.post_path = %q; must be an absolute path", path, p)
			}
			out.PostPath = p
		}
	}
	var err error
	if out.Hostname, err = accesslog.ParseText(t.GetHostname(), accesslog.Options{}); err != nil {
		return nil, fmt.Errorf("%s.hostname: %w", path, err)
	}
	headers, err := headersToAdd(path+".headers_to_add", t.GetHeadersToAdd())
	if err != nil {
		return nil, err
	}
	for i, h := range headers {
		f, err := accesslog.ParseText(h.Value, accesslog.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s.headers_to_add[%d].header.value: %w", path, i, err)
		}
		out.Headers = append(out.Headers, TunnelHeader{Key: h.Key, Value: f, Action: h.Action, KeepEmptyValue: h.KeepEmptyValue})
	}
	return out, nil
}
