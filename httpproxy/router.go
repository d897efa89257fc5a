package httpproxy

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/outlier"
	"github.com/legateproxy/legate/pool"
)

// Envoy's local reply bodies and response code details.
const (
	bodyNoHealthyUpstream = "no healthy upstream"
	bodyOverloaded        = "envoy overloaded"
	bodyUpstreamTimeout   = "upstream request timeout"
	bodyMaxStreamDuration = "upstream max stream duration reached"
	bodyResetPrefix       = "upstream connect error or disconnect/reset before headers. reset reason: "
	reasonConnectFailure  = "connection failure"
	reasonTermination     = "connection termination"
	reasonOverflow        = "overflow"
	reasonProtocolError   = "protocol error"
	reasonConnectTimeout  = "connection timeout"
)

// routeRequest is the router filter (envoy.filters.http.router): route lookup, direct
// responses, redirects, and forwarding to the chosen cluster.
func (s *stream) routeRequest() {
	h := s.h
	st := h.stats
	st.rq.On(s.line).routed.Add(1)
	m := h.route(&s.req) // the scope's table with scoped_routes (srds.go)
	if s.upgrade != "" {
		if !s.acceptUpgrade(m) {
			return
		}
		defer st.DownstreamCxUpgradesActive.Dec()
	}
	if m == nil || m.Route.Kind == route.ActionNonForwarding {
		st.NoRoute.Inc()
		s.flags |= accesslog.NoRouteFound
		s.details = "route_not_found"
		s.localReply(http.StatusNotFound, nil, nil)
		return
	}
	s.match = m
	r := m.Route
	switch r.Kind {
	case route.ActionDirectResponse:
		st.RqDirectResponse.Inc()
		s.details = "direct_response"
		s.localReply(r.DirectResponse.Status, r.DirectResponse.Body, m)
		return
	case route.ActionRedirect:
		st.RqRedirect.Inc()
		s.details = "direct_response"
		clear(s.resp)
		s.setRespHeader(hdrLocation, r.RedirectLocation(&s.req))
		s.localReply(r.Redirect.ResponseCode, nil, m)
		return
	}
	s.cluster = m.Cluster
	var mgr *pool.Manager
	if m.Cluster != "" {
		mgr = s.clusterPools(m)
	}
	if mgr != nil && mgr.Cluster().HasSubClusters() {
		mgr = h.subClusterPool(mgr, s.req.Authority)
	}
	if mgr == nil {
		st.NoCluster.Inc()
		s.flags |= accesslog.NoClusterFound
		s.details = "cluster_not_found"
		code := http.StatusServiceUnavailable
		if m.Route != nil && m.Route.ClusterNotFoundCode != 0 {
			code = m.Route.ClusterNotFoundCode
		}
		s.localReply(code, nil, m)
		return
	}
	if s.upgrading || s.tunnelsPost(m) {
		s.forwardUpgrade(mgr, m)
		return
	}
	s.forward(mgr, m)
}

// subClusterPool is the pool of the sub-cluster a request to a dynamic forward proxy cluster
// with sub_clusters_config goes through; the parent's (which has no hosts: no healthy
// upstream, as in Envoy) when the dynamic forward proxy filter did not make it.
func (h *Handler) subClusterPool(parent *pool.Manager, authority string) *pool.Manager {
	if sub := h.sh.deps.Pools.Get(parent.Cluster().ForwardProxySubCluster(authority)); sub != nil {
		return sub
	}
	return parent
}

// respString views a name or value of the upstream response's head, which stays in s.upResp
// until the stream's next request as the arena's bytes do, without copying it (about 40
// instructions a field). An HTTP/2 stream's response head is encoded before the stream goes
// back to its pool (serveStream).
func (s *stream) respString(b []byte) string { return bytesString(b) }

// upstreamRequest starts the upstream request from the inbound one, which the router never
// changes (as httputil.ReverseProxy builds outreq): the route's path and host rewrites
// (s.outPath, s.outAuthority, the original path in x-envoy-original-path) and the header it
// returns, the inbound header seen through the router's edits (outHeader). From here on the
// access log shows this request, as Envoy's shows the request its router rewrote in place.
func (s *stream) upstreamRequest(m *route.Match) *outHeader {
	hd := &s.out
	hd.reset(s.req.Header, &s.in, &s.vals)
	path, rewritten := m.Route.RewritePath(s.req.Path)
	if rewritten {
		s.setOut(hdrOriginalPath, s.req.Path)
	}
	s.outPath, s.outAuthority = path, s.req.Authority
	if m.HostRewrite != "" {
		s.outAuthority = m.HostRewrite
	}
	s.forwarded = true
	return hd
}

// spellRequest gives the upstream request's names the spelling the client used when the
// connection manager's preserve_case formatter recorded it (Envoy's formatter travels with
// the request headers to the upstream codec); the names Legate added are spelled in the
// formatter's case for them.
func (s *stream) spellRequest() {
	o := &s.h.cfg.HTTP1
	s.up.Spelled = o.HeaderCase == config.HeaderCasePreserve && s.sc != nil
	if !s.up.Spelled {
		return
	}
	s.up.OthersCase = o.PreserveOthers
	var buf [64]byte
	for i := range s.up.Header {
		f := &s.up.Header[i]
		if n, ok := spelling(s.reqNames, f.Name); ok {
			f.Name = n
		} else {
			f.Name = s.arenaString(config.AppendName(buf[:0], f.Name, o.PreserveOthers))
		}
	}
}

// forward sends the request to the cluster, retrying as the route's retry policy allows, and
// streams the response back.
func (s *stream) forward(mgr *pool.Manager, m *route.Match) {
	if s.resetBeforeUpstream() {
		return
	}
	r := m.Route
	c := mgr.Cluster()
	snap := c.Snapshot()
	codes := s.upstreamCodes(m)

	// The upstream request.
	hd := s.upstreamRequest(m)
	if s.tr.sampled && s.h.trace.cfg.Spawn {
		s.startUpstreamSpan(hd.header())
	}
	timeout := r.Timeout
	if r.GRPCTimeout != nil && isGRPC(hd.getKey(lookupKeys.contentType)) {
		timeout = r.GRPCTimeout.Timeout(hd.header())
	}
	if r.AttemptCount {
		s.setOut(hdrAttemptCount, "1")
	}
	if v := hd.getKey(lookupKeys.upstreamTimeout); len(v) > 0 {
		if ms, err := strconv.ParseUint(v[0], 10, 32); err == nil {
			timeout = time.Duration(ms) * time.Millisecond
		}
		hd.del(hdrUpstreamTimeout)
	}
	if timeout > 0 && !s.h.cfg.Router.SuppressEnvoyHeaders {
		ms := r.TimeoutMillis // the route's, made once (formatting it was about 100 instructions)
		if timeout != r.Timeout || ms == "" {
			ms = s.itoa(timeout.Milliseconds())
		}
		s.setOutKey(lookupKeys.expectedTimeout, ms)
	}
	if m.HasRequestHeaderOps() {
		full := hd.header()
		s.fillEntryBasics() // what the mutations' formatters may read
		m.FinalizeRequestHeaders(full, &s.entry)
	}
	policy := s.retryPolicy(r.RetryPolicy, hd) // consumes x-envoy-retry-on, x-envoy-max-retries
	s.up.Method = s.req.Method
	s.up.Path = s.outPath
	s.up.Host = s.outAuthority
	s.up.Header = hd.appendFields(s.up.Header[:0])
	s.spellRequest()
	s.up.Body = s.body
	s.up.ContentLength = s.contentLength
	s.up.Priority = config.PriorityDefault
	if r.Priority == route.PriorityHigh {
		s.up.Priority = config.PriorityHigh
	}
	s.up.HTTP2 = s.h2w != nil
	s.up.Scheme = s.req.Scheme
	s.up.Trailer, s.up.Downstream, s.up.InterruptBody = nil, nil, nil
	s.up.Origin = s.conn
	if s.body != nil {
		s.up.InterruptBody = s.interruptBody
	}
	switch {
	case s.h2req != nil:
		s.up.Trailer = s.h2req.Trailer // http2 fills the declared trailers at the body's end
		s.up.Downstream = s.h2req.Context()
	case s.body != nil && s.contentLength < 0:
		s.up.Trailer = s.trailers // the chunked trailer section, read with the body
	}

	var odst http.Header // read only by an ORIGINAL_DST cluster's use_http_header
	if len(c.OriginalDstHeaders()) > 0 {
		odst = hd.header()
	}
	// putStream left s.lbctx zero: two fields are set rather than the whole struct (its
	// attempted hosts' array made that about 45 instructions).
	s.lbctx.MetadataMatch, s.lbctx.OverrideHost = m.MetadataMatch, c.OriginalDst(odst, s.local, s.restored)
	if c.IsForwardProxy() {
		s.lbctx.OverrideHost = c.ForwardProxyKey(s.req.Authority)
	}
	if len(r.HashPolicy) > 0 {
		s.req.AddCookie = s.addCookie
		s.lbctx.HashKey, s.lbctx.HasHashKey = r.HashKey(&s.req, s.clientIP)
	}
	if policy != nil && policy.NumRetries > 0 && s.body != nil && !s.bufferBody() {
		policy = nil // the body did not fit the retry buffer: no retries
	}
	if len(r.Mirrors) > 0 {
		s.startMirrors(r, timeout)
	}
	if policy != nil && (policy.PreviousHosts) {
		s.lbctx.RetryCount = uint32(max(policy.HostSelectionRetryMaxAttempts, 0))
	}
	if policy != nil {
		s.lbctx.ExcludePreviousPriorities(policy.PriorityUpdateFrequency)
	}
	// Envoy's route timeout (and per-try timeout) starts when the request is complete: at
	// the head for a request without a body, at the body's end otherwise. A body still
	// arriving is bounded by stream_idle_timeout and request_timeout only; the attempt's
	// timeout then starts at its end (bodyClock), and the attempt's context is the
	// exchange's downstream, which the HTTP/1 pool abandons when the timer fires (it sets
	// no socket deadline from a context that has none yet).
	atEnd := s.body != nil && !s.clock.ended
	// One reading of the clock arms the idle timer, bases the deadline of a request with a
	// body and starts the first attempt (each reading cost about 100 instructions and two vDSO
	// calls): the stream's start when nothing since could have waited; upstream filters, which
	// may wait, take their own.
	// The readings here are stamps (shared.stamps): only durations and deadlines are taken
	// from them.
	var at int64
	switch {
	case s.startIsNow:
		at = s.startAt
	case !atEnd:
		at = s.h.sh.stamps.Now()
	}
	atMono := s.armStreamIdle(r, at) // mono at at, once converted (0: not)
	var deadline int64               // the request's deadline, a stamp (zero: none)
	if timeout > 0 && !atEnd {
		deadline = s.startAt
		if s.body != nil {
			deadline = at
		}
		deadline += int64(timeout)
	}
	var retriesLeft uint32
	if policy != nil {
		retriesLeft = policy.NumRetries
	}
	grpc := isGRPC(hd.getKey(lookupKeys.contentType))
	if len(s.h.upFilters) > 0 || len(c.Config().UpstreamHTTPFilters) > 0 {
		at, atMono = 0, 0
		if s.startUpstreamFilters(c.Config(), m) {
			return
		}
	}
	var retryRes *breaker.Resource
	defer func() {
		if retryRes != nil {
			retryRes.Release()
		}
		if s.lease != nil { // only an HTTP/2 exchange of a request with a body has one
			s.revokeBody()
		}
	}()
	for {
		hst, err := c.Pick(&s.lbctx)
		if err != nil {
			s.noHealthyUpstream(snap, m)
			return
		}
		s.upstream, s.upHost = hst.Address(), hst
		s.attempts++
		if r.AttemptCount && s.attempts > 1 {
			s.replaceUpstreamField(hdrAttemptCount, strconv.AppendUint(s.tr.scratch[:0], uint64(s.attempts), 10))
		}
		if policy != nil && policy.PreviousHosts {
			s.lbctx.AddAttempted(hst)
		}
		if s.attempt != nil && s.attempt.filters != nil && s.runUpstreamFilters(hst, m) {
			return
		}
		s.lbctx.AddAttemptedPriority(hst.Priority())
		var perTry bool
		var upStart int64 // the attempt's start, a stamp
		var tryAt int64   // the attempt's deadline, a stamp (0: none, or not yet: atEnd)
		if atEnd && !s.clock.ended {
			perTry = s.timeAtEnd(timeout, policy)
		} else {
			// One reading times the attempt: its deadline, the idle timer's comparison and
			// its start (each read of the clock cost about 150 instructions).
			upStart, at = at, 0
			upMono := atMono
			atMono = 0
			if upStart == 0 {
				upStart = s.h.sh.stamps.Now()
			}
			tryAt, perTry = tryTimeout(upStart, deadline, policy)
			s.ctx.reset(tryAt)
			s.up.Downstream = s.downstreamCtx()
			if s.idleMayCut(tryAt, upStart, upMono) {
				s.up.Downstream = s.ctx.watch(s.up.Downstream)
			}
		}
		if s.lease != nil { // revokeBody's test, without its call
			s.revokeBody() // the last attempt's HTTP/2 transport may still read it
		}
		s.up.Body = s.body
		if s.bodyBuffered {
			s.bodyReplay.Reset(s.bodyBuf)
			s.up.Body = &s.bodyReplay
		}
		s.lendBody(mgr)
		if upStart == 0 {
			upStart = s.h.sh.stamps.Now()
		}
		s.up.Start = upStart // the pool's clock is the connection manager's (server.dataPlane)
		s.up.Deadline = tryAt
		s.up.Line = s.line
		err = mgr.RoundTrip(&s.ctx, hst, &s.up, &s.upResp)
		s.endUpstreamFilters()
		var upRx int64
		if err == nil {
			upRx = s.h.sh.stamps.Now() // the response head arrived
			s.idle.touchAt(upRx)
			// Nothing on the way to an HTTP/1 response's first body read waits but the
			// writer's flushes, unless filters act on the response (h1writer.stamped).
			s.hw.stamped = s.h2w == nil && len(s.fstreams) == 0 && (s.attempt == nil || s.attempt.filters == nil)
			s.hw.waited = false
		}
		if s.bodyStopped.Swap(false) {
			s.sc.nc.SetReadDeadline(s.sc.deadline) // the body read is over; the deadline is the connection's again
			s.bodyWoken = true                     // and its error is the interruption's, not the client's
		}
		if retryRes != nil {
			retryRes.Release()
			retryRes = nil
		}
		if err != nil {
			s.upResp.Close()
			s.revokeBody() // before the body's state is read
			kind := s.classify(err)
			reportFailure(c, hst, kind, err)
			if kind == failOverflow {
				s.flags |= accesslog.UpstreamOverflow
				s.details = "overflow"
				clear(s.resp)
				if !s.h.cfg.Router.SuppressEnvoyHeaders {
					s.setRespHeader(hdrOverloaded, "true")
				}
				s.localReply(http.StatusServiceUnavailable, []byte(bodyResetPrefix+reasonOverflow), m)
				return
			}
			if kind == failTimeout && !perTry {
				codes.charge(http.StatusGatewayTimeout, snap.Stats, s.line)
				s.flags |= accesslog.UpstreamRequestTimeout
				s.details = "upstream_response_timeout"
				s.localReply(http.StatusGatewayTimeout, []byte(bodyUpstreamTimeout), m)
				return
			}
			if kind == failTimeout {
				snap.Stats.UpstreamRqPerTryTimeout.Inc()
				codes.charge(http.StatusGatewayTimeout, snap.Stats, s.line)
			}
			if s.retryAllowed(policy, kind, 0) {
				if retryRes, err = s.startRetry(policy, snap, &retriesLeft, deadline); err == nil {
					s.retryUpstreamSpan(0)
					continue
				}
			}
			s.failReply(kind, err, m)
			return
		}
		status := s.upResp.StatusCode
		reportResponse(c, hst, &s.upResp, grpc)
		codes.charge(status, snap.Stats, s.line)
		if s.retryAllowed(policy, failNone, status) {
			if res, rerr := s.startRetry(policy, snap, &retriesLeft, deadline); rerr == nil {
				retryRes = res
				s.retryUpstreamSpan(status)
				s.discardResponse()
				continue
			}
		}
		if s.attempts > 1 {
			snap.Stats.UpstreamRqRetrySuccess.Inc()
		}
		s.upTx, s.upRx = upStart, upRx
		s.respond(m, c, hst)
		return
	}
}

// clusterPools is the pools of m's cluster (pool.Registry.Get), found again without the
// registry's lookup by name while the Manager the stream used last is still the cluster's
// (GetAgain, which compares the names): the lookup was about 150 instructions a request.
// For a fixed Match naming the cluster by the string the cache was filled for (sameString),
// the names are not compared at all.
func (s *stream) clusterPools(m *route.Match) *pool.Manager {
	c := &s.pools
	reg := s.h.sh.deps.Pools
	name := m.Cluster
	if c.reg == reg && c.mgr != nil && m.Fixed() && sameString(c.key, name) && c.mgr.Current() {
		return c.mgr
	}
	var last *pool.Manager
	if c.reg == reg {
		last = c.mgr
	}
	mgr := reg.GetAgain(name, last)
	if mgr != last {
		*c = poolsCache{reg: reg, mgr: mgr}
	}
	if mgr != nil && m.Fixed() {
		c.key = name
	}
	return mgr
}

// poolsCache is the Manager clusterPools returned last, by registry; key is the name of its
// cluster as a fixed Match spells it ("" for none).
type poolsCache struct {
	reg *pool.Registry
	key string
	mgr *pool.Manager
}

// sameString reports whether a and b are the same bytes in memory, so equal without
// comparing them (a comparison of two cluster names was about 17 instructions). A cache key
// is a fixed Match's name (route.Match.Fixed), which does not change and which the cache
// holds alive: no other string can come to occupy its memory, such as a cluster_header
// value in a request's arena.
func sameString(a, b string) bool {
	return len(a) == len(b) && len(a) > 0 && unsafe.StringData(a) == unsafe.StringData(b)
}

// upstreamCodes is the response-code counters of m's cluster. The stream keeps the last
// ones it used, which a pooled stream finds again for most requests: the registry's lookup by
// name was about 170 instructions a request. A registry never drops a cluster's counters, so
// the kept ones stay right. A fixed Match naming the cluster by the cache's key finds them
// without comparing names (sameString).
func (s *stream) upstreamCodes(m *route.Match) *upstreamCodeStats {
	c := &s.codes
	reg := s.h.sh.stats
	name := m.Cluster
	if c.reg == reg && m.Fixed() && sameString(c.key, name) {
		return c.codes
	}
	if c.reg != reg || c.name != name {
		codes := reg.upstream(name)
		// The registry's copy of the name: name itself may view the request (cluster_header).
		*c = codesCache{reg: reg, name: codes.name, codes: codes}
	}
	if m.Fixed() {
		c.key = name
	}
	return c.codes
}

// codesCache is the counters upstreamCodes returned last, by registry and cluster name; key
// is that name as a fixed Match spells it ("" for none).
type codesCache struct {
	reg   *statsRegistry
	name  string
	key   string
	codes *upstreamCodeStats
}

// tryTimeout is the deadline of an attempt starting at now within the request's deadline
// (stamps; zero: none): the per-try timeout's when it ends first (perTry).
func tryTimeout(now, deadline int64, policy *route.RetryPolicy) (int64, bool) {
	if policy != nil && policy.PerTryTimeout > 0 {
		if d := now + int64(policy.PerTryTimeout); deadline == 0 || d < deadline {
			return d, true
		}
	}
	return deadline, false
}

// timeAtEnd sets up an attempt whose timeout starts at the end of the request body that
// it sends: the route's timeout, or the per-try timeout when shorter (perTry), if any. The
// attempt's context then stands for the downstream request too (its parent is the HTTP/2
// request's, and stream_idle_timeout aborts it).
func (s *stream) timeAtEnd(timeout time.Duration, policy *route.RetryPolicy) (perTry bool) {
	d := timeout
	if policy != nil && policy.PerTryTimeout > 0 && (d <= 0 || policy.PerTryTimeout < d) {
		d, perTry = policy.PerTryTimeout, true
	}
	s.ctx.resetAtEnd(d)
	s.up.Downstream = s.ctx.watch(s.downstreamCtx()) // also ended by stream_idle_timeout
	return perTry
}

// downstreamCtx is the HTTP/2 request's context; nil for HTTP/1.
func (s *stream) downstreamCtx() context.Context {
	if s.h2req != nil {
		return s.h2req.Context()
	}
	return nil
}

// armStreamIdle applies the route's idle_timeout, which overrides stream_idle_timeout, and
// arms the timer for a request without a body (one with a body armed it for the body) at now,
// a stamp (zero: none). It returns mono at now when it converted now, else 0.
func (s *stream) armStreamIdle(r *route.Route, now int64) (nowMono int64) {
	d := s.h.cfg.StreamIdleTimeout
	if r.IdleTimeoutSet {
		d = r.IdleTimeout
	}
	switch {
	case s.idle.d > 0:
		s.idle.retime(d)
	case d > 0 && s.body == nil:
		nowMono = s.monoOf(now)
		s.idle.arm(s, d, true, nowMono)
	}
	return nowMono
}

// noHealthyUpstream answers a request for which the cluster has no host to pick.
func (s *stream) noHealthyUpstream(snap *cluster.Snapshot, m *route.Match) {
	snap.Stats.UpstreamCxNoneHealthy.Inc()
	s.flags |= accesslog.NoHealthyUpstream
	s.details = "no_healthy_upstream"
	s.localReply(http.StatusServiceUnavailable, []byte(bodyNoHealthyUpstream), m)
}

// hdrImmediateHealthCheckFail in an upstream response marks its host unhealthy at once.
const hdrImmediateHealthCheckFail = "x-envoy-immediate-health-check-fail"

// reportResponse reports an attempt that got response headers, as Envoy's router does for
// every attempt (retried ones included): the connection was made (a local-origin success,
// which counts only with split_external_local_origin_errors), then the upstream's status —
// for a gRPC request whose response headers carry grpc-status (a trailers-only response), the
// HTTP status that gRPC status maps to. A response carrying
// x-envoy-immediate-health-check-fail fails the host's active health check at once and
// excludes it from load balancing until a check passes.
func reportResponse(c *cluster.Cluster, h *host.Host, resp *pool.Response, grpc bool) {
	if c.Outlier() != nil {
		status := resp.StatusCode
		if grpc {
			if v := resp.Get(hdrGRPCStatus); v != nil {
				status = grpcToHTTPStatus(v)
			}
		}
		c.ReportResult(h, outlier.ConnectSuccess)
		c.ReportResult(h, outlier.HTTPStatus(status))
	}
	// The checker first: only it acts on the header, whose lookup scans every field (about
	// 45 instructions a response).
	if hc := c.HealthChecker(); hc != nil && resp.Get(hdrImmediateHealthCheckFail) != nil {
		hc.ReportPassiveFailure(h, true)
	}
}

const hdrGRPCStatus = "grpc-status"

// hdrAttemptCount is the attempt number the router sends upstream (and back) when the virtual
// host asks for it.
const hdrAttemptCount = "X-Envoy-Attempt-Count"

// isGRPC reports a gRPC request by its content-type values: application/grpc, alone or
// followed by "+" or ";" (Envoy's isGrpcRequestHeaders; gRPC-Web is not).
func isGRPC(v []string) bool {
	if len(v) == 0 {
		return false
	}
	rest, ok := strings.CutPrefix(v[0], "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// grpcToHTTPStatus maps a grpc-status value to the HTTP status Envoy counts for it
// (Grpc::Utility::grpcToHttpStatus, after Google's API error model); a value that is not a
// known code is an internal error (500).
func grpcToHTTPStatus(v []byte) int {
	code := -1
	for i, c := range v {
		if c < '0' || c > '9' {
			return http.StatusInternalServerError
		}
		if i == 0 {
			code = 0
		}
		if code = code*10 + int(c-'0'); code > 255 {
			return http.StatusInternalServerError
		}
	}
	// Indexed by gRPC code: OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED,
	// NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION,
	// ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED.
	statuses := [...]int{200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401}
	if code < 0 || code >= len(statuses) {
		return http.StatusInternalServerError
	}
	return statuses[code]
}

// reportFailure reports an attempt that got no response to the outlier detector, with Envoy's
// router semantics:
//   - a connect failure or connect_timeout is a local-origin connect failure (a 503 when
//     external and local-origin errors are not split);
//   - a timeout or reset on an established connection follows the connection's success: a
//     timeout counts as a 504, a reset or protocol error as a connect failure;
//   - a request that never had a connection (circuit-breaker overflow, the route's timeout
//     while connecting or waiting for a connection, a pool closed under it) is not the host's
//     doing and is not reported, as Envoy reports only attempts that reached a host;
//   - nor is an attempt ended by the downstream request body (malformed, truncated, too
//     slow): the client's error, which Envoy sees in its codec, never at the host.
func reportFailure(c *cluster.Cluster, h *host.Host, kind failure, err error) {
	if c.Outlier() == nil {
		return
	}
	switch {
	case kind == failOverflow || kind == failDownstream || kind == failMaxDuration || errors.Is(err, pool.ErrClosed) || errors.Is(err, pool.ErrNotWarm):
	case errors.Is(err, pool.ErrConnectFailure):
		if kind != failTimeout {
			c.ReportResult(h, outlier.ConnectFailed)
		}
	case err == context.DeadlineExceeded || err == context.Canceled: //nolint:errorlint // unwrapped: the pool's wait for a connection ended
	case kind == failTimeout:
		c.ReportResult(h, outlier.ConnectSuccess)
		c.ReportResult(h, outlier.Timeout.WithStatus(http.StatusGatewayTimeout))
	default:
		c.ReportResult(h, outlier.ConnectSuccess)
		c.ReportResult(h, outlier.ConnectFailed)
	}
}

// Request headers that change the retry policy (and are not forwarded).
const (
	hdrRetryOn    = "X-Envoy-Retry-On"
	hdrMaxRetries = "X-Envoy-Max-Retries"
)

// retryPolicy applies x-envoy-retry-on (its conditions are added to the route's) and
// x-envoy-max-retries (it replaces num_retries) to the route's policy, as Envoy's retry
// state does; the headers are removed from the upstream request. The merged policy lives in
// the stream.
func (s *stream) retryPolicy(rp *route.RetryPolicy, hd *outHeader) *route.RetryPolicy {
	on, max := hd.getKey(lookupKeys.retryOn), hd.getKey(lookupKeys.maxRetries)
	if len(on) == 0 && len(max) == 0 {
		return rp
	}
	hd.del(hdrRetryOn)
	hd.del(hdrMaxRetries)
	if rp != nil {
		s.mergedRetry = *rp
	} else {
		s.mergedRetry = defaultRetryPolicy
	}
	p := &s.mergedRetry
	if len(on) > 0 {
		bits, _ := route.ParseRetryOn(on[0])
		p.RetryOn |= bits
	}
	if len(max) > 0 {
		if n, err := strconv.ParseUint(max[0], 10, 32); err == nil {
			p.NumRetries = uint32(n)
		}
	}
	if p.RetryOn == 0 {
		return rp
	}
	return p
}

// defaultRetryPolicy is the policy of a request that asks for retries by header on a route
// without a retry policy (Envoy's RetryPolicy defaults).
var defaultRetryPolicy = route.RetryPolicy{
	NumRetries: 1, HostSelectionRetryMaxAttempts: 1,
	BaseInterval: 25 * time.Millisecond, MaxInterval: 250 * time.Millisecond,
}

// failure is how an upstream attempt failed.
type failure uint8

const (
	failNone failure = iota
	failConnect
	failConnectTimeout
	failReset
	failProtocol
	failTimeout
	failOverflow
	failDownstream  // reading the downstream request body failed: the client's error
	failMaxDuration // the cluster's max_stream_duration reset the attempt
)

// isDeadline reports a read that ended at the request's deadline: the route's timeout, not
// something the host did after answering.
func isDeadline(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
}

// classify is the stream's view of a failed attempt: a downstream request body that could not
// be read ended it, whatever the pool made of the failure (bodyFault).
func (s *stream) classify(err error) failure {
	if s.bodyFault(err) != faultNone {
		return failDownstream
	}
	return classify(err, &s.ctx)
}

func classify(err error, ctx context.Context) failure {
	switch {
	case errors.Is(err, pool.ErrRequestBody):
		return failDownstream
	case errors.Is(err, breaker.ErrOverflow):
		return failOverflow
	case errors.Is(err, pool.ErrMaxStreamDuration):
		return failMaxDuration
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return failTimeout
	case errors.Is(err, pool.ErrConnectTimeout):
		return failConnectTimeout
	case errors.Is(err, pool.ErrConnectFailure):
		return failConnect
	case errors.Is(err, pool.ErrProtocol):
		return failProtocol
	}
	return failReset
}

// retryAllowed applies retry_on to a failed attempt (kind) or a response (status).
func (s *stream) retryAllowed(p *route.RetryPolicy, kind failure, status int) bool {
	if p == nil || p.NumRetries == 0 {
		return false
	}
	on := p.RetryOn
	switch kind {
	case failConnect, failConnectTimeout:
		return on&(route.RetryConnectFailure|route.Retry5xx|route.RetryGatewayError|route.RetryReset) != 0
	case failReset, failProtocol:
		return on&(route.Retry5xx|route.RetryGatewayError|route.RetryReset) != 0
	case failTimeout: // a per-try timeout counts as a 504
		return on&(route.Retry5xx|route.RetryGatewayError) != 0
	case failDownstream: // the body cannot be read again
		return false
	case failMaxDuration: // the limit is the cluster's, not the attempt's
		return false
	}
	switch {
	case on&route.Retry5xx != 0 && status >= 500:
		return true
	case on&route.RetryGatewayError != 0 && (status == 502 || status == 503 || status == 504):
		return true
	case on&route.RetryRetriable4xx != 0 && status == http.StatusConflict:
		return true
	case on&route.RetryRetriableStatusCodes != 0:
		for _, c := range p.RetriableStatusCodes {
			if int(c) == status {
				return true
			}
		}
	}
	return false
}

var errNoRetry = errors.New("no retry")

// startRetry takes a retry from the budget and the max_retries circuit breaker, and waits for
// the jittered exponential back-off. It returns the breaker resource to release once the
// retried attempt ends.
func (s *stream) startRetry(p *route.RetryPolicy, snap *cluster.Snapshot, left *uint32, deadline int64) (*breaker.Resource, error) {
	st := snap.Stats
	if *left == 0 {
		st.UpstreamRqRetryLimitExceeded.Inc()
		s.flags |= accesslog.UpstreamRetryLimitExceeded
		return nil, errNoRetry
	}
	res := &snap.Breaker.Priority(s.up.Priority).Retries
	if res.TryAcquire() != nil {
		st.UpstreamRqRetryOverflow.Inc()
		return nil, errNoRetry
	}
	*left--
	st.UpstreamRqRetry.Inc()
	retried := p.NumRetries - *left // 1 for the first retry
	base, maxI := p.BaseInterval, p.MaxInterval
	if base <= 0 {
		base = 25 * time.Millisecond
	}
	if maxI <= 0 {
		maxI = 10 * base
	}
	ceiling := base << min(retried-1, 20)
	if ceiling <= 0 || ceiling > maxI {
		ceiling = maxI
	}
	wait := time.Duration(rand.Int64N(int64(ceiling)))
	if deadline != 0 {
		if left := time.Duration(deadline - s.h.sh.stamps.Now()); wait > left {
			wait = max(left, 0)
		}
	}
	if wait > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		t := time.NewTimer(wait)
		<-t.C
	}
	return res, nil
}

// failReply answers an attempt that got no response; err is its failure.
func (s *stream) failReply(kind failure, err error, m *route.Match) {
	switch kind {
	case failDownstream:
		s.requestBodyFailed(err)
	case failTimeout:
		s.flags |= accesslog.UpstreamRequestTimeout
		s.details = "upstream_per_try_timeout"
		s.localReply(http.StatusGatewayTimeout, []byte(bodyUpstreamTimeout), m)
		return
	case failConnect:
		s.flags |= accesslog.UpstreamConnectionFailure
		s.details = "upstream_reset_before_response_started{connection_failure}"
		s.localReply(http.StatusServiceUnavailable, []byte(bodyResetPrefix+reasonConnectFailure), m)
	case failConnectTimeout:
		s.flags |= accesslog.UpstreamConnectionFailure
		s.details = "upstream_reset_before_response_started{connection_timeout}"
		s.localReply(http.StatusServiceUnavailable, []byte(bodyResetPrefix+reasonConnectTimeout), m)
	case failMaxDuration:
		// Envoy's 408 while the request is still arriving, 504 once it was whole.
		status := http.StatusGatewayTimeout
		if s.body != nil && !s.clock.ended {
			status = http.StatusRequestTimeout
		}
		s.flags |= accesslog.UpstreamMaxStreamDurationReached
		s.details = "upstream_max_stream_duration_reached"
		s.localReply(status, []byte(bodyMaxStreamDuration), m)
	case failProtocol:
		s.flags |= accesslog.UpstreamProtocolError
		s.details = "upstream_reset_before_response_started{protocol_error}"
		s.localReply(http.StatusServiceUnavailable, []byte(bodyResetPrefix+reasonProtocolError), m)
	default:
		s.flags |= accesslog.UpstreamConnectionTermination
		s.details = "upstream_reset_before_response_started{connection_termination}"
		s.localReply(http.StatusServiceUnavailable, []byte(bodyResetPrefix+reasonTermination), m)
	}
}

// discardResponse reads a small retried response to its end so its connection is reused,
// and closes it.
func (s *stream) discardResponse() {
	if s.upResp.Body != nil && s.upResp.ContentLength >= 0 && s.upResp.ContentLength <= maxDrainedBody {
		var scratch [512]byte
		for {
			if _, err := s.upResp.Body.Read(scratch[:]); err != nil {
				break
			}
		}
	}
	s.upResp.Close()
}

// bufferBody reads the request body into memory so that retries can replay it; it reports
// false when the body exceeds the buffer limit (the body read so far is still sent).
func (s *stream) bufferBody() bool { return s.readBody(s.bufferLimit()) == nil }

// BufferBody implements filter.Downstream (the buffer filter): the whole body in memory, up
// to limit bytes.
func (s *stream) BufferBody(limit int64) error {
	if s.body == nil {
		return nil
	}
	err := s.readBody(limit)
	if err == filter.ErrBodyTooLarge {
		s.h.stats.DownstreamRqTooLarge.Inc()
	}
	return err
}

// BufferedBody is the request body BufferBody read whole (filter.Exchange.BufferedBody); nil
// when it has not been read. Filters may read it until the stream ends; they must not change it.
func (s *stream) BufferedBody() []byte {
	if !s.bodyBuffered {
		return nil
	}
	return s.bodyBuf
}

// BufferedTrailers is what the upstream request carries as trailers once BufferBody read the
// body whole (filter.Exchange.BufferedTrailers): HTTP/2's, which http2 filled at the body's
// end; an HTTP/1 body buffered whole goes with its length, without trailers.
func (s *stream) BufferedTrailers() http.Header {
	if !s.bodyBuffered || s.h2req == nil {
		return nil
	}
	return s.h2req.Trailer
}

// readBody reads the request body into bodyBuf, to be replayed to each attempt. Past limit,
// or on a read error, what was read is still sent, followed by the rest of the body, and the
// error is filter.ErrBodyTooLarge or the read's.
func (s *stream) readBody(limit int64) error {
	if s.bodyBuffered {
		if int64(len(s.bodyBuf)) > limit {
			return filter.ErrBodyTooLarge
		}
		return nil
	}
	if s.contentLength > limit {
		return filter.ErrBodyTooLarge
	}
	buf := s.bodyBuf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := s.body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil || int64(len(buf)) > limit {
			s.bodyReplay.Reset(buf)
			s.up.Body = io.MultiReader(&s.bodyReplay, s.body)
			s.body = s.up.Body
			s.bodyBuf = nil
			if err != nil {
				return err
			}
			return filter.ErrBodyTooLarge
		}
	}
	s.bodyBuf, s.bodyBuffered = buf, true
	s.contentLength = int64(len(buf))
	s.up.ContentLength = s.contentLength
	return nil
}

// skipResponseHeader reports the hop-by-hop and framing response headers the codec owns
// (knownKinds' fieldDropped).
func skipResponseHeader(k string) bool {
	switch k {
	case hdrConnection, hdrKeepAlive, hdrProxyConnection, hdrTransferEncoding, hdrUpgrade, hdrContentLength, hdrTE, hdrDate:
		return true
	}
	return false
}

// mapResponseHeader fills the response header map from the upstream's fields: names
// canonicalized (or their spellings recorded), hop-by-hop fields and those the codec writes
// itself left out.
func (s *stream) mapResponseHeader(resp *pool.Response) {
	for i := range resp.Header {
		f := &resp.Header[i]
		k, name := "", ""
		if !s.respSpelled {
			k = knownResponseKey(f.Name)
		}
		if k == "" {
			name = s.respString(f.Name)
			k = canonicalKey(name)
		}
		if skipResponseHeader(k) {
			continue
		}
		if s.respSpelled {
			s.respNames = append(s.respNames, name)
		}
		v := s.respString(f.Value)
		if old, ok := s.resp[k]; ok {
			s.resp[k] = append(old, v)
			continue
		}
		s.setRespHeader(k, v)
	}
}

// respond streams the upstream response downstream (s.upTx and s.upRx: the attempt's start
// and its head's arrival). An upstream reset while the body streams is reported to c's
// outlier detector as a connect failure of h, as Envoy's router does.
func (s *stream) respond(m *route.Match, c *cluster.Cluster, h *host.Host) {
	resp := &s.upResp
	clearMap(s.resp) // nearly always empty here: the runtime's clear would be called anyway
	if hc := &c.Config().HTTP1; hc.HeaderCase == config.HeaderCasePreserve && !resp.HTTP2 {
		s.respSpelled, s.respOthers = true, hc.PreserveOthers
	}
	s.respDirect = s.headDirect(m)
	if !s.respDirect {
		s.mapResponseHeader(resp)
	}
	if !s.respDirect {
		if m.Route != nil && m.Route.AttemptCountInResponse {
			s.setRespHeader(hdrAttemptCount, s.itoa(int64(s.attempts)))
		}
		if !s.h.cfg.Router.SuppressEnvoyHeaders {
			s.setRespHeader(hdrServiceTime, s.itoa(time.Duration(s.upRx-s.upTx).Milliseconds()))
		}
		for _, c := range s.setCookies {
			s.resp["Set-Cookie"] = append(s.resp["Set-Cookie"], c)
		}
		if s.attempt != nil && s.attempt.filters != nil {
			s.upstreamFiltersOnResponse()
		}
	}
	s.details = "via_upstream"
	s.headBody, s.headUp = s.heldSource(resp), resp
	s.sendHead(resp.StatusCode, resp.ContentLength, m)
	if s.held {
		s.writeBody(s.heldBody)
		if s.heldErr != nil {
			s.responseCut(c, h)
			return
		}
	}
	if !s.held && (resp.Body != nil || s.respRW != nil) {
		if _, err := s.copyBody(resp); err != nil {
			s.responseCut(c, h)
			return
		}
	}
	switch {
	case s.respRW != nil || s.held:
		s.emitTrailers() // collected, and rewritten, at the body's end
	case len(resp.Trailer) > 0:
		s.collectTrailers(resp.Trailer)
		s.emitTrailers()
	}
	// One reading of the clock (about 100 instructions and two vDSO calls) ends the upstream
	// exchange (upstream_rq_time, its connection's idle start) and, when nothing after it may
	// wait (filter streams, response rewriters, a last write the socket did not take at once),
	// the stream too (process).
	end := s.h.sh.stamps.Now()
	quiet := len(s.fstreams) == 0 && len(s.rwClosers) == 0
	resp.CloseAt(end, s.h.sh.stamps.System())
	s.hw.waited = false
	s.finish()
	if quiet && !s.hw.waited {
		s.endAt = end
	}
}

// responseCut ends a response that failed after it started: the upstream reset, the client
// went away (a failed write: DC), or the downstream request body (still streaming upstream)
// failed. The response cannot be completed, so the downstream connection (HTTP/1) or stream
// (HTTP/2) is reset. Only an upstream failure is charged to h, reported to c's outlier
// detector as a connect failure as Envoy's router does.
func (s *stream) responseCut(c *cluster.Cluster, h *host.Host) {
	s.revokeBody() // before the body's state is read
	upErr := s.respObserved.err
	switch {
	case s.bodyFault(upErr) != faultNone:
		s.requestBodyFailed(upErr)
	case upErr == nil && s.h2w == nil && s.hw.err != nil:
		s.downstreamGone() // the client left while the response was written to it
	default:
		s.h.stats.RqResetAfterDownstreamStarted.Inc()
		if upErr != nil && !isDeadline(upErr) {
			c.ReportResult(h, outlier.ConnectFailed)
		}
		s.flags |= accesslog.UpstreamConnectionTermination
	}
	s.closeConn = true
	s.aborted = true
	s.upResp.Close()
	if s.h2w == nil {
		s.hw.flush()
	}
}

// collectTrailers keeps the upstream response's trailer fields (gRPC's grpc-status and
// grpc-message) in respTrailers, without the fields the codec owns.
func (s *stream) collectTrailers(fields []pool.RawField) {
	if s.respTrailers == nil {
		s.respTrailers = make(http.Header, len(fields))
	}
	for i := range fields {
		f := &fields[i]
		k := canonicalKey(s.arenaString(f.Name))
		if skipResponseHeader(k) || k == hdrTrailer {
			continue
		}
		s.respTrailers[k] = append(s.respTrailers[k], s.arenaString(f.Value))
	}
}

// emitTrailers sends respTrailers, when there are any: in a trailing HEADERS frame on HTTP/2,
// and in the chunked trailer section on HTTP/1.1 when the connection manager's
// enable_trailers is set (Envoy's HTTP/1 codec drops them otherwise). Filters and the access
// log (%TRAILER(...)%) see them either way.
func (s *stream) emitTrailers() {
	if len(s.respTrailers) == 0 {
		return
	}
	h1 := s.h2w == nil && s.hw.chunked && !s.hw.noBody && s.h.cfg.HTTP1.EnableTrailers
	for k, vs := range s.respTrailers {
		for _, v := range vs {
			switch {
			case s.h2w != nil:
				// http2 sends the header map's http.TrailerPrefix keys as trailers.
				tk := http.TrailerPrefix + k
				s.resp[tk] = append(s.resp[tk], v)
			case h1:
				s.hw.trailer = s.appendRespName(s.hw.trailer, k)
				s.hw.trailer = append(s.hw.trailer, ": "...)
				s.hw.trailer = append(s.hw.trailer, v...)
				s.hw.trailer = append(s.hw.trailer, '\r', '\n')
			}
		}
	}
	for _, fs := range s.fstreams {
		fs.ResponseTrailers(s.respTrailers)
	}
}

// itoa formats n into the arena.
func (s *stream) itoa(n int64) string {
	var b [20]byte
	return s.arenaString(strconv.AppendInt(b[:0], n, 10))
}
