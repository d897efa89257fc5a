package health

import matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

func upstreamMain() bool { return false }

func stringMatcherPrefix(p string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: p}}
}
