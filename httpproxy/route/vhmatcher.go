package route

import (
	"fmt"
	"net/textproto"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/matcher"
	"github.com/legateproxy/legate/internal/registry"
)

// RequestInputs is the kind of the HTTP matching inputs a virtual host's matcher reads
// requests with (envoy.matching.http.input).
var RequestInputs = registry.Kind[matcher.InputFactory[Request]]{Category: registry.MatchingHTTPInput}

// requestHeadersInput is envoy.matching.inputs.request_headers: a header's value, several
// joined with ',', none when absent.
func requestHeadersInput(cfg proto.Message) (matcher.Input[Request], error) {
	name := cfg.(*matcherv3.HttpRequestHeaderMatchInput).GetHeaderName()
	if name == "" {
		return nil, fmt.Errorf("header_name: empty")
	}
	key := strings.ToLower(name)
	if !strings.HasPrefix(key, ":") {
		key = textproto.CanonicalMIMEHeaderKey(key)
	}
	return func(r *Request) (string, bool) { return r.header(key) }, nil
}

// routeMatcher is a virtual host's compiled matcher: each action is the routes it names
// (a Route, or a RouteList), tried in order with their own match.
type routeMatcher = matcher.Matcher[Request, []*Route]

// compileMatcher compiles a virtual host's matcher, whose actions are
// envoy.config.route.v3.Route or RouteList compiled as the host's routes are.
func (c *compiler) compileMatcher(p *routev3.VirtualHost, vh *VirtualHost, path string) (*routeMatcher, error) {
	if len(p.GetRoutes()) > 0 {
		return nil, fmt.Errorf("%s.matcher: set with routes; only one of routes and matcher may be", path)
	}
	return matcher.Compile(p.GetMatcher(), path+".matcher", matcher.Domain[Request, []*Route]{
		Registry: c.opts.Extensions,
		Inputs:   RequestInputs,
		Action: func(at string, a *xdscorev3.TypedExtensionConfig) ([]*Route, error) {
			var one routev3.Route
			var list routev3.RouteList
			tc := a.GetTypedConfig()
			switch {
			case tc != nil && tc.MessageIs(&one):
				if err := tc.UnmarshalTo(&one); err != nil {
					return nil, fmt.Errorf("%s.typed_config: %w", at, err)
				}
				r, err := c.matcherRoute(&one, vh, at+".typed_config")
				if err != nil {
					return nil, err
				}
				return []*Route{r}, nil
			case tc != nil && tc.MessageIs(&list):
				if err := tc.UnmarshalTo(&list); err != nil {
					return nil, fmt.Errorf("%s.typed_config: %w", at, err)
				}
				var out []*Route
				for i, rp := range list.GetRoutes() {
					r, err := c.matcherRoute(rp, vh, fmt.Sprintf("%s.typed_config.routes[%d]", at, i))
					if err != nil {
						return nil, err
					}
					out = append(out, r)
				}
				return out, nil
			}
			return nil, fmt.Errorf("%s.typed_config: type %q (name %q): not implemented by Legate; a virtual host matcher's action is an envoy.config.route.v3.Route or RouteList", at, tc.GetTypeUrl(), a.GetName())
		},
	})
}

// matchRoutes finds req's route through the virtual host's matcher: the first route of the
// matched action whose own match also matches req, as Envoy; nil when none does.
func (vh *VirtualHost) matchRoutes(req *Request, p string) *Match {
	rs, ok := vh.matcher.Match(req)
	if !ok {
		return nil
	}
	for _, r := range rs {
		if r.match.matches(req, p) {
			return r.resolve(req)
		}
	}
	return nil
}

// matcherRoute compiles a route of a matcher action. Compile's audit does not see inside the
// action's Any, so the route's fields are audited here.
func (c *compiler) matcherRoute(p *routev3.Route, vh *VirtualHost, path string) (*Route, error) {
	if err := audit(p.ProtoReflect(), path+"."); err != nil {
		return nil, err
	}
	return c.route(p, vh, path)
}
