package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// DialFunc opens a connection, as net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// newProber builds the prober for spec.Kind.
func newProber(spec *config.HealthCheck, opts *Options) (Prober, error) {
	t := target{spec: spec, opts: opts}
	switch {
	case spec.Kind == config.HTTPHealthCheckKind && spec.HTTP != nil:
		return &httpProber{target: t, hc: spec.HTTP}, nil
	case spec.Kind == config.TCPHealthCheckKind && spec.TCP != nil:
		return &tcpProber{target: t, hc: spec.TCP}, nil
	case spec.Kind == config.GRPCHealthCheckKind && spec.GRPC != nil:
		return &grpcProber{target: t, hc: spec.GRPC}, nil
	}
	return nil, fmt.Errorf("health check kind %s has no settings", spec.Kind)
}

// target holds what every prober needs to reach a host.
type target struct {
	spec *config.HealthCheck
	opts *Options
}

func (t target) address(h *host.Host) string {
	if t.opts.AddressFor != nil {
		if a := t.opts.AddressFor(h); a != "" {
			return a
		}
	}
	return h.Address()
}

// tlsConfig returns the host's TLS client configuration with tls_options.alpn_protocols applied,
// or nil for plain text.
func (t target) tlsConfig(h *host.Host, defaultALPN ...string) *tls.Config {
	if t.opts.TLSConfigFor == nil {
		return nil
	}
	cfg := t.opts.TLSConfigFor(h)
	if cfg == nil {
		return nil
	}
	cfg = cfg.Clone()
	switch {
	case len(t.spec.TLSALPN) > 0:
		cfg.NextProtos = append([]string(nil), t.spec.TLSALPN...)
	case len(cfg.NextProtos) == 0 && len(defaultALPN) > 0:
		cfg.NextProtos = defaultALPN
	}
	return cfg
}

func (t target) dial(ctx context.Context, addr string) (net.Conn, error) {
	if t.opts.Dial != nil {
		return t.opts.Dial(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// authority is the HTTP Host / gRPC :authority: the configured value, else the cluster name.
func (t target) authority(configured string) string {
	if configured != "" {
		return configured
	}
	return t.opts.ClusterName
}

// transport returns an HTTP transport for one host: its own connection (reused across checks
// when reuse_connection is set), HTTP/1.1 or HTTP/2 (prior knowledge in plain text, ALPN h2 over
// TLS), no compression and no proxy.
func (t target) transport(h *host.Host, http2 bool) (*http.Transport, string) {
	scheme := "http"
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return t.dial(ctx, addr) },
		DisableCompression:  true,
		DisableKeepAlives:   !t.spec.ReuseConnection,
		MaxIdleConnsPerHost: 1,
		Protocols:           new(http.Protocols),
	}
	alpn := "http/1.1"
	if http2 {
		alpn = "h2"
	}
	if cfg := t.tlsConfig(h, alpn); cfg != nil {
		scheme = "https"
		tr.TLSClientConfig = cfg
		if http2 {
			tr.Protocols.SetHTTP2(true)
		} else {
			tr.Protocols.SetHTTP1(true)
		}
	} else if http2 {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	return tr, scheme
}

// applyHeaders edits request headers as Envoy's header parser does: removals first, then
// additions with their append actions; empty values are skipped unless keep_empty_value.
func applyHeaders(hdr http.Header, add []config.HeaderToAdd, remove []string) {
	for _, k := range remove {
		hdr.Del(k)
	}
	for _, a := range add {
		if a.Value == "" && !a.KeepEmptyValue {
			continue
		}
		_, present := hdr[http.CanonicalHeaderKey(a.Key)]
		switch a.Action {
		case config.AppendIfExistsOrAdd:
			hdr.Add(a.Key, a.Value)
		case config.AddIfAbsent:
			if !present {
				hdr.Add(a.Key, a.Value)
			}
		case config.OverwriteIfExistsOrAdd:
			hdr.Set(a.Key, a.Value)
		case config.OverwriteIfExists:
			if present {
				hdr.Set(a.Key, a.Value)
			}
		}
	}
	// Go's client sends its own User-Agent when none is set; an empty value suppresses it, so a
	// removed user-agent stays removed.
	if _, ok := hdr["User-Agent"]; !ok {
		hdr["User-Agent"] = []string{""}
	}
}

// matchPayloads reports whether every segment occurs in buf, each after the previous one
// (Envoy's PayloadMatcher::match).
func matchPayloads(segments [][]byte, buf []byte) bool {
	start := 0
	for _, seg := range segments {
		i := indexFrom(buf, seg, start)
		if i < 0 {
			return false
		}
		start = i + len(seg)
	}
	return true
}

func indexFrom(buf, seg []byte, start int) int {
	if start > len(buf) {
		return -1
	}
	i := bytes.Index(buf[start:], seg)
	if i < 0 {
		return -1
	}
	return start + i
}
