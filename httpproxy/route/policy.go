package route

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
)

// RetryOn is the bit set parsed from RetryPolicy.retry_on (HTTP and gRPC conditions).
type RetryOn uint32

// The retry conditions, named after their retry_on tokens.
const (
	Retry5xx                     RetryOn = 1 << iota // 5xx
	RetryGatewayError                                // gateway-error
	RetryConnectFailure                              // connect-failure
	RetryRetriable4xx                                // retriable-4xx
	RetryRefusedStream                               // refused-stream
	RetryRetriableStatusCodes                        // retriable-status-codes
	RetryReset                                       // reset
	RetryResetBeforeRequest                          // reset-before-request
	RetryEnvoyRateLimited                            // envoy-ratelimited
	RetryRetriableHeaders                            // retriable-headers
	RetryHTTP3PostConnectFailure                     // http3-post-connect-failure
	RetryGRPCCancelled                               // cancelled
	RetryGRPCDeadlineExceeded                        // deadline-exceeded
	RetryGRPCResourceExhausted                       // resource-exhausted
	RetryGRPCUnavailable                             // unavailable
	RetryGRPCInternal                                // internal
)

// retryOnTokens maps retry_on tokens to bits. Read-only.
var retryOnTokens = map[string]RetryOn{
	"5xx":                        Retry5xx,
	"gateway-error":              RetryGatewayError,
	"connect-failure":            RetryConnectFailure,
	"retriable-4xx":              RetryRetriable4xx,
	"refused-stream":             RetryRefusedStream,
	"retriable-status-codes":     RetryRetriableStatusCodes,
	"reset":                      RetryReset,
	"reset-before-request":       RetryResetBeforeRequest,
	"envoy-ratelimited":          RetryEnvoyRateLimited,
	"retriable-headers":          RetryRetriableHeaders,
	"http3-post-connect-failure": RetryHTTP3PostConnectFailure,
	"cancelled":                  RetryGRPCCancelled,
	"deadline-exceeded":          RetryGRPCDeadlineExceeded,
	"resource-exhausted":         RetryGRPCResourceExhausted,
	"unavailable":                RetryGRPCUnavailable,
	"internal":                   RetryGRPCInternal,
}

// ParseRetryOn parses a comma-separated retry_on value (the route field or the
// x-envoy-retry-on / x-envoy-retry-grpc-on headers). Unknown tokens are returned separately:
// Envoy ignores them.
func ParseRetryOn(s string) (on RetryOn, unknown []string) {
	for tok := range strings.SplitSeq(s, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		if bit, ok := retryOnTokens[tok]; ok {
			on |= bit
		} else {
			unknown = append(unknown, tok)
		}
	}
	return on, unknown
}

// RetryPolicy is a compiled route.v3.RetryPolicy.
type RetryPolicy struct {
	RetryOn RetryOn
	// NumRetries is num_retries (default 1).
	NumRetries uint32
	// PerTryTimeout and PerTryIdleTimeout are 0 when unset (the route timeout applies).
	PerTryTimeout, PerTryIdleTimeout time.Duration
	// RetriableStatusCodes are used with retriable-status-codes.
	RetriableStatusCodes []uint32
	// PreviousHosts is set by the envoy.retry_host_predicates.previous_hosts predicate;
	// OmitCanaryHosts by envoy.retry_host_predicates.omit_canary_hosts.
	PreviousHosts, OmitCanaryHosts bool
	// PriorityUpdateFrequency is the previous_priorities retry priority's update_frequency:
	// every that many attempts, the levels attempted leave the priority load (see
	// lb.Context.ExcludePreviousPriorities). 0 without a retry priority.
	PriorityUpdateFrequency uint32
	// HostSelectionRetryMaxAttempts is host_selection_retry_max_attempts (default 1).
	HostSelectionRetryMaxAttempts int64
	// BaseInterval (default 25 ms) and MaxInterval (default 10 × base) are retry_back_off.
	BaseInterval, MaxInterval time.Duration
	// RetriableHeaders and RetriableRequestHeaders are compiled header matchers; use
	// RetriableResponse and RetriableRequest.
	retriableHeaders, retriableRequestHeaders []headerMatcher
}

// RetriableRequest reports whether the request may be retried under retriable_request_headers
// (true when none are configured).
func (p *RetryPolicy) RetriableRequest(req *Request) bool {
	if len(p.retriableRequestHeaders) == 0 {
		return true
	}
	for i := range p.retriableRequestHeaders {
		if p.retriableRequestHeaders[i].match(req) {
			return true
		}
	}
	return false
}

// RetriableResponse reports whether response headers match retriable_headers (for
// retriable-headers).
func (p *RetryPolicy) RetriableResponse(h map[string][]string) bool {
	view := Request{Header: h}
	for i := range p.retriableHeaders {
		if p.retriableHeaders[i].match(&view) {
			return true
		}
	}
	return false
}

// HashKind is the source of a hash policy.
type HashKind uint8

// The hash policy sources.
const (
	HashHeader HashKind = iota
	HashCookie
	HashSourceIP
	HashQueryParameter
	hashNone // connection_properties without source_ip: never produces a hash
)

// HashPolicy is one RouteAction.hash_policy entry.
type HashPolicy struct {
	Kind HashKind
	// Name is the header (canonical form, or a lower-case pseudo-header), cookie or query
	// parameter name.
	Name string
	// Terminal stops the evaluation once a hash has been produced.
	Terminal bool
	// CookieTTL (when CookieTTLSet) makes a missing cookie be generated; CookiePath is its path.
	CookieTTL    time.Duration
	CookieTTLSet bool
	CookiePath   string

	rewrite *rewrite // header regex_rewrite
}

// HashKey computes the request hash for ring hash and Maglev, as Envoy does: each policy that
// yields a value is hashed with xxHash64 and folded in (the previous hash rotated left by one
// bit, XORed), and a terminal policy that produced a hash ends the walk. sourceIP is the
// downstream address without port. ok is false when no policy produced a value.
func (r *Route) HashKey(req *Request, sourceIP string) (uint64, bool) {
	var hash uint64
	have := false
	for i := range r.HashPolicy {
		p := &r.HashPolicy[i]
		h, ok := p.evaluate(req, sourceIP)
		if ok {
			old := uint64(0)
			if have {
				old = hash<<1 | hash>>63
			}
			hash = old ^ h
			have = true
		}
		if p.Terminal && have {
			break
		}
	}
	return hash, have
}

func (p *HashPolicy) evaluate(req *Request, sourceIP string) (uint64, bool) {
	switch p.Kind {
	case HashHeader:
		return p.hashHeader(req)
	case HashCookie:
		if v, _ := cookieValue(req.Headers(), p.Name); v != "" { // Envoy treats "" as absent
			return xxhash.Sum64String(v), true
		}
		if p.CookieTTLSet && req.AddCookie != nil {
			v := req.AddCookie(p.Name, p.CookiePath, p.CookieTTL)
			return xxhash.Sum64String(v), true
		}
	case HashSourceIP:
		if sourceIP == "" {
			return 0, false
		}
		return xxhash.Sum64String(sourceIP), true
	case HashQueryParameter:
		if v, ok := rawQueryParam(req.Path, p.Name); ok {
			return xxhash.Sum64String(v), true
		}
	}
	return 0, false
}

// hashHeader hashes all values of the header, sorted so that their order does not matter,
// each value seeding the next (Envoy's HashUtil::xxHash64 over a span).
func (p *HashPolicy) hashHeader(req *Request) (uint64, bool) {
	if v, isPseudo := req.pseudo(p.Name); isPseudo {
		if v == "" {
			return 0, false
		}
		return xxhash.Sum64String(p.rewritten(v)), true
	}
	vs := req.Headers()[p.Name]
	switch len(vs) {
	case 0:
		return 0, false
	case 1:
		return xxhash.Sum64String(p.rewritten(vs[0])), true
	}
	sorted := make([]string, len(vs))
	for i, v := range vs {
		sorted[i] = p.rewritten(v)
	}
	slices.Sort(sorted)
	var d xxhash.Digest
	var seed uint64
	for _, v := range sorted {
		d.ResetWithSeed(seed)
		_, _ = d.WriteString(v)
		seed = d.Sum64()
	}
	return seed, true
}

func (p *HashPolicy) rewritten(v string) string {
	if p.rewrite == nil {
		return v
	}
	return p.rewrite.Apply(v)
}

// Redirect is Route.redirect.
type Redirect struct {
	// Scheme is scheme_redirect, or "https" for https_redirect; empty keeps the scheme.
	Scheme string
	// Host is host_redirect; Port is port_redirect (0: unchanged).
	Host string
	Port uint32
	// Path is path_redirect; PrefixRewrite is prefix_rewrite.
	Path          string
	PrefixRewrite string
	// ResponseCode is the HTTP status: 301 (default), 302, 303, 307 or 308.
	ResponseCode int
	// StripQuery drops the query (not one given in Path).
	StripQuery bool

	regexRewrite *rewrite
}

// RedirectLocation builds the Location of a redirect route for req, following Envoy: the new
// scheme, host and port; the request's port is dropped when a port is given, or when the scheme
// changes and the port was the default of the request's scheme; the path is replaced or
// rewritten, keeping the query unless strip_query.
func (r *Route) RedirectLocation(req *Request) string {
	rd := r.Redirect
	if rd == nil {
		return ""
	}
	scheme := rd.Scheme
	if scheme == "" {
		scheme = req.Scheme
		if scheme == "" {
			scheme = "http"
		}
	}
	port := ""
	if rd.Port != 0 {
		port = ":" + strconv.FormatUint(uint64(rd.Port), 10)
	}
	host := rd.Host
	if host == "" {
		host = req.Authority
		if i := redirectPortStart(host); i >= 0 {
			reqPort := host[i:]
			remove := port != ""
			if scheme != req.Scheme {
				remove = remove || req.Scheme == "https" && reqPort == ":443" || req.Scheme == "http" && reqPort == ":80"
			}
			if remove {
				host = host[:i]
			}
		}
	}
	path := req.Path
	pathHasQuery := false
	switch {
	case rd.Path != "":
		pathHasQuery = strings.IndexByte(rd.Path, '?') >= 0
		if pathHasQuery {
			path = rd.Path
		} else {
			path = rd.Path + req.Path[len(pathOnly(req.Path)):]
		}
	case rd.regexRewrite != nil:
		p := pathOnly(req.Path)
		path = rd.regexRewrite.Apply(p) + req.Path[len(p):]
	case rd.PrefixRewrite != "":
		p := pathOnly(req.Path)
		path = rd.PrefixRewrite + p[r.match.rewriteLen(p):] + req.Path[len(p):]
	}
	if rd.StripQuery && !pathHasQuery {
		if q := strings.IndexByte(path, '?'); q >= 0 {
			path = path[:q]
		}
	}
	return scheme + "://" + host + port + path
}

// redirectPortStart finds ":port" in a host, bracketed IPv6 literals included.
func redirectPortStart(host string) int {
	if strings.HasPrefix(host, "[") {
		if i := strings.LastIndex(host, "]:"); i >= 0 {
			return i + 1
		}
		return -1
	}
	return strings.LastIndexByte(host, ':')
}
