package route

import (
	"fmt"
	"net/textproto"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Mirror is one RouteAction.request_mirror_policies entry: a copy of each request the route
// forwards goes to another cluster, fire and forget, its response discarded.
type Mirror struct {
	// Cluster is the mirror cluster; ClusterHeader (canonical form) names the request header
	// that holds it instead. Exactly one is set.
	Cluster       string
	ClusterHeader string
	// KeepHost is disable_shadow_host_suffix_append: the copy's authority is not given the
	// "-shadow" suffix. HostRewrite is host_rewrite_literal, which replaces it.
	KeepHost    bool
	HostRewrite string

	fraction  *runtimeFraction // runtime_fraction; nil mirrors every request
	featureOn func(key string, numerator, denominator, random uint64) bool
}

// Sampled reports whether the request with the random value random is mirrored, through
// runtime_fraction (the runtime key may override its default).
func (m *Mirror) Sampled(random uint64) bool {
	f := m.fraction
	switch {
	case f == nil:
		return true
	case m.featureOn != nil:
		return m.featureOn(f.key, f.numerator, f.denominator, random)
	}
	return random%f.denominator < f.numerator
}

// ClusterFor returns the cluster the request's copy goes to ("" when cluster_header names a
// header the request lacks).
func (m *Mirror) ClusterFor(r *Request) string {
	if m.ClusterHeader == "" {
		return m.Cluster
	}
	if vs := r.Headers()[m.ClusterHeader]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Authority returns the copy's :authority for the original authority a: "-shadow" appended to
// its host, before any port, as Envoy marks shadowed requests for upstream logs, unless
// disabled or rewritten.
func (m *Mirror) Authority(a string) string {
	switch {
	case m.HostRewrite != "":
		return m.HostRewrite
	case m.KeepHost || a == "":
		return a
	}
	host, port := a, ""
	if i := strings.LastIndexByte(a, ':'); i >= 0 && !strings.HasSuffix(a, "]") {
		host, port = a[:i], a[i:]
	}
	return host + "-shadow" + port
}

// compileMirrors compiles request_mirror_policies. trace_sampled only steers the copy's trace
// span, and Legate refuses tracing, so it changes nothing here.
func (c *compiler) compileMirrors(r *Route, ps []*routev3.RouteAction_RequestMirrorPolicy, path string) error {
	for i, p := range ps {
		ppath := fmt.Sprintf("%s.request_mirror_policies[%d]", path, i)
		m := Mirror{
			Cluster: p.GetCluster(), KeepHost: p.GetDisableShadowHostSuffixAppend(),
			HostRewrite: p.GetHostRewriteLiteral(), featureOn: c.opts.FeatureEnabled,
		}
		switch {
		case m.Cluster != "" && p.GetClusterHeader() != "":
			return fmt.Errorf("%s: only one of cluster and cluster_header may be set", ppath)
		case p.GetClusterHeader() != "":
			m.ClusterHeader = textproto.CanonicalMIMEHeaderKey(p.GetClusterHeader())
		case m.Cluster == "":
			return fmt.Errorf("%s: one of cluster or cluster_header is required", ppath)
		default:
			if err := c.checkCluster(m.Cluster, ppath+".cluster"); err != nil {
				return err
			}
		}
		if len(p.GetRequestHeadersMutations()) > 0 {
			return fmt.Errorf("%s.request_headers_mutations: not implemented by Legate", ppath)
		}
		if rf := p.GetRuntimeFraction(); rf != nil {
			d, err := denominator(rf.GetDefaultValue().GetDenominator(), ppath+".runtime_fraction.default_value.denominator")
			if err != nil {
				return err
			}
			m.fraction = &runtimeFraction{key: rf.GetRuntimeKey(), numerator: uint64(rf.GetDefaultValue().GetNumerator()), denominator: d}
		}
		r.Mirrors = append(r.Mirrors, m)
	}
	return nil
}
