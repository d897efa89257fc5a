package headertometadata

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	h2mv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/internal/registry"
)

// Name and TypeURL select the filter in http_filters; typed_per_filter_config entries take
// the same type.
const (
	Name    = "envoy.filters.http.header_to_metadata"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config"
	// maxValueLen is Envoy's bound on a value: longer ones add nothing.
	maxValueLen = 8 * 1024
)

// pair is a compiled KeyValuePair.
type pair struct {
	namespace, key, value string
	rewrite               *headermatch.Rewrite
	typ                   h2mv3.Config_ValueType
	base64                bool
}

// rule is a compiled Rule.
type rule struct {
	header    string // canonical key; "" for a cookie rule
	authority bool   // the header is host or :authority
	cookie    string
	remove    bool
	present   *pair
	missing   *pair
}

// Rules are one configuration's compiled request and response rules. Immutable.
type Rules struct {
	request, response []rule
}

// Filter is one configured header_to_metadata filter. Immutable; safe for concurrent use.
type Filter struct {
	name  string // the key of its typed_per_filter_config entries
	rules *Rules
}

// Register registers the filter and its per-route configuration (the same Config).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &h2mv3.Config{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &h2mv3.Config{},
	})
}

// FromAny builds the filter from its typed_config (nil has no rules: routes bring them).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	rules, err := compileAny(cfg, "typed_config", false)
	if err != nil {
		return nil, err
	}
	f := &Filter{name: Name, rules: rules}
	if ctx != nil && ctx.Name != "" {
		f.name = ctx.Name
	}
	return f, nil
}

// PerRouteFromAny compiles a typed_per_filter_config entry, which must have rules (Envoy).
func PerRouteFromAny(cfg *anypb.Any) (*Rules, error) {
	return compileAny(cfg, "typed_per_filter_config", true)
}

func compileAny(cfg *anypb.Any, field string, perRoute bool) (*Rules, error) {
	var pb h2mv3.Config
	if cfg != nil {
		if cfg.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%s: %s: type %q; want %s", Name, field, cfg.GetTypeUrl(), TypeURL)
		}
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", Name, field, err)
		}
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", Name, field, err)
	}
	if pb.GetStatPrefix() != "" {
		return nil, fmt.Errorf("%s: %s.stat_prefix: the filter's stats are not implemented by Legate", Name, field)
	}
	if perRoute && len(pb.GetRequestRules()) == 0 && len(pb.GetResponseRules()) == 0 {
		return nil, fmt.Errorf("%s: %s: a per-route configuration must have request_rules or response_rules", Name, field)
	}
	r := &Rules{}
	var err error
	if r.request, err = compileRules(pb.GetRequestRules(), field+".request_rules", true); err != nil {
		return nil, err
	}
	if r.response, err = compileRules(pb.GetResponseRules(), field+".response_rules", false); err != nil {
		return nil, err
	}
	return r, nil
}

func compileRules(in []*h2mv3.Config_Rule, path string, request bool) ([]rule, error) {
	out := make([]rule, 0, len(in))
	for i, pr := range in {
		r, err := compileRule(pr, fmt.Sprintf("%s[%d]", path, i), request)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func compileRule(pr *h2mv3.Config_Rule, path string, request bool) (rule, error) {
	r := rule{cookie: pr.GetCookie(), remove: pr.GetRemove()}
	switch h := strings.ToLower(pr.GetHeader()); {
	case h != "" && r.cookie != "":
		return r, fmt.Errorf("%s: header and cookie are exclusive", path)
	case h == "" && r.cookie == "":
		return r, fmt.Errorf("%s: one of header and cookie is required", path)
	case r.cookie != "" && r.remove:
		return r, fmt.Errorf("%s.remove: cannot remove a cookie", path)
	case r.cookie != "" && !request:
		return r, fmt.Errorf("%s.cookie: cookies are read from requests only", path)
	case request && (h == "host" || h == ":authority"):
		if r.remove {
			return r, fmt.Errorf("%s.remove: removing %s is not implemented by Legate", path, h)
		}
		r.authority = true
	case h != "" && h[0] == ':':
		return r, fmt.Errorf("%s.header = %q: pseudo-headers are not implemented by Legate", path, pr.GetHeader())
	case h != "":
		r.header = textproto.CanonicalMIMEHeaderKey(h)
	}
	if pr.GetOnHeaderPresent() == nil && pr.GetOnHeaderMissing() == nil {
		return r, fmt.Errorf("%s: neither on_header_present nor on_header_missing is set", path)
	}
	var err error
	if p := pr.GetOnHeaderPresent(); p != nil {
		if p.GetValue() != "" && p.GetRegexValueRewrite() != nil {
			return r, fmt.Errorf("%s.on_header_present: value and regex_value_rewrite are exclusive", path)
		}
		if r.present, err = compilePair(p, path+".on_header_present"); err != nil {
			return r, err
		}
	}
	if p := pr.GetOnHeaderMissing(); p != nil {
		if p.GetValue() == "" {
			return r, fmt.Errorf("%s.on_header_missing.value: required (it stands for the missing header)", path)
		}
		if p.GetRegexValueRewrite() != nil {
			return r, fmt.Errorf("%s.on_header_missing.regex_value_rewrite: applies to on_header_present only", path)
		}
		if r.missing, err = compilePair(p, path+".on_header_missing"); err != nil {
			return r, err
		}
	}
	return r, nil
}

func compilePair(p *h2mv3.Config_KeyValuePair, path string) (*pair, error) {
	out := &pair{namespace: p.GetMetadataNamespace(), key: p.GetKey(), value: p.GetValue(),
		typ: p.GetType(), base64: p.GetEncode() == h2mv3.Config_BASE64}
	if out.namespace == "" {
		out.namespace = Name
	}
	if rw := p.GetRegexValueRewrite(); rw != nil {
		var err error
		if out.rewrite, err = headermatch.CompileRewrite(rw, path+".regex_value_rewrite"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rulesFor returns the rules of the request's most specific route level, else the filter's.
func (f *Filter) rulesFor(x *filter.Exchange) *Rules {
	if c, ok := x.PerFilterConfig(f.name); ok {
		if r, ok := c.Config.(*Rules); ok {
			return r
		}
	}
	return f.rules
}

// OnRequest applies the request rules to the request headers.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	rules := f.rulesFor(x).request
	for i := range rules {
		value, found := rules[i].extractRequest(x)
		rules[i].apply(x, value, found)
	}
	return nil
}

// OnResponse applies the response rules to the response headers.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	rules := f.rulesFor(x).response
	for i := range rules {
		value, found := rules[i].extractHeader(h)
		rules[i].apply(x, value, found)
	}
}

// extractRequest reads the rule's header or cookie of the request.
func (r *rule) extractRequest(x *filter.Exchange) (string, bool) {
	switch {
	case r.authority:
		return x.Request.Authority, x.Request.Authority != ""
	case r.cookie != "":
		v := cookieValue(x.Request.Header, r.cookie)
		return v, v != ""
	}
	return r.extractHeader(x.Request.Header)
}

// extractHeader reads the rule's header (its values joined with ","), removing it when the
// rule says so.
func (r *rule) extractHeader(h http.Header) (string, bool) {
	vs, ok := h[r.header]
	if !ok {
		return "", false
	}
	if r.remove {
		delete(h, r.header)
	}
	if len(vs) == 1 {
		return vs[0], true
	}
	return strings.Join(vs, ","), true
}

// cookieValue returns the value of the first cookie called name in the Cookie headers
// (quotes around it removed), or "".
func cookieValue(h http.Header, name string) string {
	for _, line := range h["Cookie"] {
		for part := range strings.SplitSeq(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v
		}
	}
	return ""
}

// apply adds the metadata of the rule's present or missing pair.
func (r *rule) apply(x *filter.Exchange, value string, found bool) {
	p := r.missing
	if found {
		p = r.present
	}
	if p == nil {
		return
	}
	switch {
	case p.value != "":
		value = p.value
	case p.rewrite != nil:
		value = p.rewrite.Apply(value)
	}
	if v, ok := p.convert(value); ok {
		x.SetMetadataValue(p.namespace, p.key, v)
	}
}

// convert makes the metadata value of a header value; ok is false when it adds nothing.
func (p *pair) convert(value string) (*structpb.Value, bool) {
	if value == "" || len(value) >= maxValueLen {
		return nil, false
	}
	if p.base64 {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(value, "="))
		if err != nil || len(b) == 0 {
			return nil, false
		}
		value = string(b)
	}
	switch p.typ {
	case h2mv3.Config_NUMBER:
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, false
		}
		return structpb.NewNumberValue(n), true
	case h2mv3.Config_PROTOBUF_VALUE:
		v := &structpb.Value{}
		if err := proto.Unmarshal([]byte(value), v); err != nil {
			return nil, false
		}
		return v, true
	}
	return structpb.NewStringValue(value), true
}
