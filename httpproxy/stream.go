package httpproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/h2wire"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/internal/procpin"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
)

// Header names the connection manager and router write, in canonical form.
const (
	hdrXFF               = "X-Forwarded-For"
	hdrXFProto           = "X-Forwarded-Proto"
	hdrRequestID         = "X-Request-Id"
	hdrEnvoyInternal     = "X-Envoy-Internal"
	hdrExternalAddress   = "X-Envoy-External-Address"
	hdrServiceTime       = "X-Envoy-Upstream-Service-Time"
	hdrExpectedTimeout   = "X-Envoy-Expected-Rq-Timeout-Ms"
	hdrUpstreamTimeout   = "X-Envoy-Upstream-Rq-Timeout-Ms"
	hdrOriginalPath      = "X-Envoy-Original-Path"
	hdrOverloaded        = "X-Envoy-Overloaded"
	hdrServer            = "Server"
	hdrDate              = "Date"
	hdrContentType       = "Content-Type"
	hdrLocation          = "Location"
	textPlain            = "text/plain"
	maxRetainedWriteBuf  = 64 << 10
	maxDrainedBody       = 64 << 10
	h2CopyBuffer         = 8 << 10
	defaultRetryBufLimit = 1 << 20
	maxTrailerFields     = 100 // a stream without a handler: max_headers_count's default
)

// drainer is the listener's drain decision (listener.Conn.DrainClose).
type drainer interface{ DrainClose() bool }

// stream is one downstream request and its response, from the head to the last byte, on
// either codec. Streams are pooled; every field belongs to the goroutine serving the stream.
type stream struct {
	h *Handler

	// HTTP/1 downstream.
	sc    *serverConn
	hbody bodyReader
	hw    h1writer
	wbuf  []byte
	minor int
	head  bool // HEAD request
	// HTTP/2 downstream.
	h2w    *h2stream // the HTTP/2 stream's response writer; nil on HTTP/1
	h2copy []byte    // upstream body copy buffer, made on first use

	rqBody requestBody // the request body under request_timeout (timeout.go)
	clock  bodyClock   // the request body under stream_idle_timeout and the route's timeout
	idle   streamIdle  // stream_idle_timeout while the request body arrives

	proto    string
	remote   string
	remoteIP string
	direct   string // the socket's peer, for %DOWNSTREAM_DIRECT_REMOTE_ADDRESS%
	// client and clientIP are the trusted client address (xffClient): the socket's peer
	// unless x-forwarded-for names another, as Envoy's downstream remote address.
	client   string
	clientIP string
	local    string
	restored bool // local is the connection's original destination (ORIGINAL_DST clusters)
	tls      bool
	connID   uint64 // the listener connection's id (%CONNECTION_ID%)
	drain    drainer
	// conn is the downstream connection, which the upstream request names (pool.Request's
	// Origin) for original_src's binding and pool key.
	conn *listener.Conn

	req           route.Request
	hdr           http.Header // HTTP/1 request header storage
	in            inIndex     // s.req.Header's names and fields (outheader.go)
	out           outHeader   // the upstream request's header (upstreamRequest)
	outPath       string      // the upstream request's :path and :authority, once forwarded
	outAuthority  string
	forwarded     bool // the router built the upstream request: the access log shows it
	vals          []string
	arena         []byte
	body          io.Reader
	contentLength int64
	start         time.Time
	startAt       int64      // start's stamp (shared.stamps), from which durations count
	startIsNow    bool       // nothing since start was read could have waited: it stands for now (forward)
	endAt         int64      // the response's end (a stamp), when it stands for the stream's (respond; zero: none)
	line          stats.Line // the P line of the stream's hot stats (stats.ThisLine at begin)
	fx            filter.Exchange
	attempt       *attemptFilters // the router's upstream filters' state (upstreamfilters.go); nil until used
	replyHeader   http.Header     // a filter's local reply's headers (filter.Reply.Header)
	gone          bool            // the client went away while a filter paused the request (body.go)

	resp      http.Header
	respStore http.Header // HTTP/1 response header storage
	// respDirect: the response header is written from upResp's fields, not from resp
	// (directhead.go); resp stays empty.
	respDirect bool
	respVals   []string
	status     int
	headSent   bool
	closeConn  bool
	aborted    bool // the response started and cannot be completed: reset it
	bytesIn    int64
	bytesOut   int64
	flags      accesslog.ResponseFlags
	details    string
	cluster    string
	upstream   string
	attempts   uint32
	requestID  string
	edge       bool        // an external request at the edge (use_remote_address, not internal)
	tr         streamTrace // the request's span (trace.go)
	// reqEnd is when the request body's last byte was read (a stamp; 0: not yet), written by
	// whichever goroutine reads the body; upRx is when the upstream's response head arrived
	// (a stamp; zero: none). They time %REQUEST_DURATION%, %RESPONSE_DURATION% and
	// %RESPONSE_TX_DURATION%.
	reqEnd  atomic.Int64
	upRx    int64
	upTx    int64      // when the answered attempt was sent (a stamp; zero: none)
	upHost  *host.Host // the host of the latest attempt (nil: none), for host metadata tags
	match   *route.Match
	codes   codesCache // the cluster counters the stream used last, kept while pooled (upstreamCodes)
	pools   poolsCache // the cluster pools the stream used last, kept while pooled (clusterPools)
	up      pool.Request
	upResp  pool.Response
	lbctx   lb.Context
	ctx     deadlineCtx
	bodyBuf []byte
	// bodyBuffered: bodyBuf holds the whole request body, replayed to each attempt (bodyBuf
	// itself keeps its storage between requests, so it says nothing).
	bodyBuffered bool
	bodyReplay   bytes.Reader
	lease        *bodyLease // the body lent to the current HTTP/2 upstream exchange (bodylease.go)
	bodyWoken    bool       // revokeBody woke a Read of the body: its error is not the client's
	entry        accesslog.Entry
	entryUsed    bool // entry was filled (fillEntryBasics, the only writer): putStream clears it
	logBuf       []byte
	mergedRetry  route.RetryPolicy                                 // the route's retry policy with x-envoy-retry-on/max-retries
	setCookies   []string                                          // hash policy cookies for the response
	addCookie    func(name, path string, ttl time.Duration) string // s.addDownstreamCookie, made once

	// chain is this stream's filters when its handler has ECDS filters (pinFilters, ecds.go);
	// empty otherwise, and then h.filters serve.
	chain []filter.Filter
	// skip is the route looked up before the filters when its table disables some filter per
	// route (typed_per_filter_config disabled); nil otherwise.
	skip *route.Match

	// The filters' streams (filter.StreamFilter) and what feeds them; all unused, and free,
	// while fstreams is empty.
	fstreams     []filter.Stream
	reqObserved  observedBody      // wraps the request body for RequestBody/RequestTrailers
	respObserved observedBody      // wraps the upstream response body (ResponseBody, read errors)
	trailersOut  bool              // RequestTrailers was reported
	trailers     http.Header       // HTTP/1 request trailers (chunked trailer section)
	respTrailers http.Header       // the upstream response's trailers; made on first use
	keepTrailer  func(line []byte) // s.addTrailer, made once
	h2req        *http.Request     // the HTTP/2 request, whose Trailer http2 fills at the body's end

	// The filters' body rewriters (rewrite.go): respRW those of the response, set as its head
	// is sent; rwClosers the rewriters' readers to close when the stream is done.
	respRW    []filter.BodyRewriter
	rwClosers []io.Closer
	// headBody and headUp are the response body (and its upstream response, nil for a local
	// reply) that sendHead reads whole when a filter holds the head (holdResponse); held says
	// it did, heldBody is what it read, heldErr how the read failed.
	headBody io.Reader
	headUp   *pool.Response
	held     bool
	heldBody []byte
	heldErr  error

	// Header names as their sender spelled them, kept under a preserve_case formatter:
	// reqNames those of an HTTP/1 request (the connection manager's), respNames those of an
	// HTTP/1 upstream response (the cluster's) when respSpelled; names without a recorded
	// spelling are written in respOthers case (formatter_type_on_envoy_headers).
	reqNames    []string
	respNames   []string
	respSpelled bool
	respOthers  config.HeaderCase
	// reject is the status the connection manager's HTTP/1 options answer the request with
	// (426, 400, 404; see refusal), rejectDetails its response code details; 0 for none.
	reject        int
	rejectDetails string

	// Upgrades (upgrade.go).
	upgrade   string // the upgrade the request asks for ("websocket", "CONNECT"); "" for none
	upgrading bool   // the upgrade was accepted (counted in downstream_cx_upgrades_active)
	tunnel    bool   // the response head opens a tunnel: no framing headers, no connection: close

	// interruptBody is stopBodyRead, made once (pool.Request.InterruptBody); bodyStopped
	// says it set an HTTP/1 read deadline, which forward puts back after RoundTrip, or
	// serveH1 after the stream (an HTTP/2 exchange interrupts the body when it ends).
	interruptBody func()
	// fillHeader is fillReqHeader, bound once (route.Request.Fill).
	fillHeader func()
	// sendSocket is hw.sendSocket, bound once (h1writer.send).
	sendSocket  func(fd uintptr) bool
	bodyStopped atomic.Bool
	// state is the stream's filter state (filter.Exchange.FilterState, %FILTER_STATE%), whose
	// parent is its connection's; reset for each request, so it allocates only when a
	// filter sets more objects than a previous request of the stream did.
	state filterstate.State
}

// The stream's header maps start at eight entries, one map group: Go keeps such a map small
// (a lookup compares keys without hashing them, a clear touches one group), which a typical
// head fits; a larger head grows the pooled stream's map once.
// streamPool keeps finished streams for the next requests: one is taken and given back per
// request, hence a per-P cache (procpin.Cache, bound as idleBuffers is; with it and
// idleBuffers, sync.Pool's shared ring and pinning were about 280 instructions a request on
// the HTTP/1.1 rig). At most 64 streams per P stay in it for good.
var streamPool = procpin.Cache[stream]{New: func() *stream {
	s := &stream{hdr: make(http.Header, 8), out: outHeader{full: make(http.Header, 8)}, respStore: make(http.Header, 8), trailers: make(http.Header, 2)}
	s.addCookie = s.addDownstreamCookie
	s.keepTrailer = s.addTrailer
	s.interruptBody = s.stopBodyRead
	s.fillHeader = s.fillReqHeader
	s.sendSocket = s.hw.sendSocket
	return s
}, Bound: 64}

func getStream() *stream { return streamPool.Get() }

// putStream clears what the stream must not keep alive and returns it to the pool.
func putStream(s *stream) {
	// Filters had the exchange when the handler has any (the filters' loops in process and
	// sendHead run over h.filters, or the ECDS chain pinned from them).
	lent := s.h == nil || len(s.h.filters) > 0
	s.ctx.stop()
	s.h, s.sc, s.h2w, s.drain, s.match, s.body, s.h2req, s.skip, s.replyHeader = nil, nil, nil, nil, nil, nil, nil, nil, nil
	s.tr = streamTrace{}
	s.respRW, s.headBody, s.headUp, s.heldBody, s.heldErr = nil, nil, nil, nil, nil
	s.reqObserved, s.respObserved = observedBody{}, observedBody{}
	clearMap(s.trailers)
	s.out.release()
	s.req = route.Request{}
	if lent { // else process did not set it, and sendHead set only numbers (about 30 instructions)
		s.fx = filter.Exchange{}
	}
	s.state.Reset(nil) // the objects and the connection's state are not kept alive
	if s.attempt != nil {
		s.attempt.filters = nil
	}
	clear(s.chain)
	s.chain = s.chain[:0]
	if s.entryUsed { // most requests leave it zero; clearing it was about 50 instructions
		s.entry, s.entryUsed = accesslog.Entry{}, false
	}
	s.resp = nil
	s.lbctx = lb.Context{}
	s.up.Body, s.up.Trailer, s.up.Downstream = nil, nil, nil
	s.bodyReplay.Reset(nil)
	s.rqBody = requestBody{}
	s.clock = bodyClock{}
	if cap(s.wbuf) > maxRetainedWriteBuf {
		s.wbuf = nil
	}
	if cap(s.bodyBuf) > maxRetainedWriteBuf {
		s.bodyBuf = nil
	}
	streamPool.Put(s)
}

// begin resets the per-request state shared by both codecs.
func (s *stream) begin(h *Handler) {
	s.h = h
	s.start = h.sh.deps.Now()
	s.startAt = h.sh.stamps.At(s.start)
	s.line = stats.ThisLine()
	s.in.lazy = false // the map of the stream's last request is not this one's
	s.in.loose()      // startH1 indexes an HTTP/1 request
	s.arena = s.arena[:0]
	s.vals = s.vals[:0]
	s.respVals = s.respVals[:0]
	s.status, s.headSent, s.closeConn, s.aborted = 0, false, false, false
	s.bytesIn, s.bytesOut = 0, 0
	s.flags, s.details, s.cluster, s.upstream, s.attempts, s.requestID = 0, "", "", "", 0, ""
	s.reqEnd.Store(0)
	s.upRx, s.upTx, s.upHost, s.endAt = 0, 0, nil, 0
	s.gone, s.forwarded, s.bodyWoken = false, false, false
	s.bodyBuf, s.bodyBuffered = s.bodyBuf[:0], false
	s.setCookies = s.setCookies[:0]
	s.trailersOut = false
	s.respRW, s.held, s.respDirect = nil, false, false
	s.reqNames, s.respNames, s.respSpelled = s.reqNames[:0], s.respNames[:0], false
	s.reject, s.rejectDetails = 0, ""
	s.upgrade, s.upgrading, s.tunnel = "", false, false
	s.idle.d = 0
	s.idle.fired.Store(false)
	clearMap(s.trailers)
	clearMap(s.respTrailers)
}

// setRequest sets the route request of a stream from getStream, whose s.req putStream left
// zero, as route.Request{Authority: authority, ..., Scheme: "http", DrawRandom: true}
// would: the literal zeroed a copy of the whole request and copied it in (about 45
// instructions a request, 15 by the fields).
func (s *stream) setRequest(authority, path, method string, header http.Header) {
	r := &s.req
	r.Authority, r.Path, r.Method, r.Scheme, r.Header, r.DrawRandom = authority, path, method, "http", header, true
}

// clearMap clears h, testing first whether there is anything to clear: clear calls the
// runtime even for an empty map (about 25 instructions), three times a request for trailers
// that nearly no request has.
func clearMap(h http.Header) {
	if len(h) > 0 {
		clear(h)
	}
}

// startH1 starts one HTTP/1 request whose head was just read: it parses the head and sets up
// the request's body. It reports false when the head was refused and the connection closes.
// serveH1 serves the request.
func (s *stream) startH1(sc *serverConn, head []byte) bool {
	h := sc.h
	s.begin(h)
	s.sc = sc
	s.remote, s.remoteIP, s.local, s.tls = sc.remote, sc.remoteIP, sc.local, sc.tls
	s.restored, s.direct = sc.restored, sc.direct
	s.connID, s.conn = sc.lc.ID(), sc.lc
	s.state.Reset(sc.lc.FilterState())
	s.drain = sc
	s.arena = append(s.arena, head...)
	if len(s.hdr) > 0 { // the last request's map, if it was filled
		clear(s.hdr)
	}
	s.in.reset()
	var rh http1.RequestHead
	if err := parseHead(&rh, bytesString(s.arena), s.hdr, &s.in, &s.vals, int(h.cfg.MaxHeadersCount), &h.cfg.HTTP1, &s.reqNames); err != nil {
		sc.headError(err)
		return false
	}
	s.reject, s.rejectDetails = refusal(&rh, &h.cfg.HTTP1)
	s.minor = rh.Minor
	s.upgrade = upgradeType(&rh)
	s.proto = "HTTP/1.1"
	if rh.Minor == 0 {
		s.proto = "HTTP/1.0"
	}
	if s.reject == http.StatusUpgradeRequired {
		s.minor = 1 // Envoy answers in HTTP/1.1 when it does not accept HTTP/1.0
	}
	s.head = rh.Method == http.MethodHead
	s.setRequest(rh.Host, rh.Target, rh.Method, s.hdr)
	if s.in.lazy {
		s.req.Fill = s.fillHeader
	}
	if s.tls {
		s.req.Scheme = "https"
	}
	s.ctx.setup(h.sh, nil)
	s.hbody.reset(&sc.rd, rh.Framing)
	switch rh.Framing.Mode {
	case http1.Chunked:
		s.body, s.contentLength = &s.hbody, -1
		if h.cfg.HTTP1.EnableTrailers { // Envoy's HTTP/1 codec drops them otherwise
			s.hbody.trailer = s.keepTrailer
		}
	case http1.Length:
		s.body, s.contentLength = &s.hbody, rh.Framing.Length
	default:
		s.body, s.contentLength = nil, 0
	}
	s.closeConn = rh.Close || s.reject == http.StatusUpgradeRequired // a codec error in Envoy
	s.hw.begin(sc.nc, sc.rd.raw, &sc.fd, s.sendSocket, &s.idle, s.wbuf[:0], h.stats.rq, s.line)
	if s.body != nil {
		// request_timeout bounds the waits for request body bytes; stream_idle_timeout
		// bounds the gaps between them (streamIdle).
		// The connection's idle deadline, still on the socket, is not the body's.
		if d := s.armRequestTimeout(); !d.Equal(sc.deadline) {
			sc.deadline = d
			sc.nc.SetReadDeadline(d)
		}
		s.watchBody()
	}
	if rh.Expect100 && s.body != nil {
		s.hw.buf = append(s.hw.buf, "HTTP/1.1 100 Continue\r\n\r\n"...)
		s.hw.flush()
	}
	return true
}

// readsClient reports whether serving the request started may read more from the client: an
// upgraded connection's bytes, or a request body not wholly buffered with its head (a
// chunked one is always read through its framing).
func (s *stream) readsClient() bool {
	return s.upgrade != "" || (s.body != nil && (s.contentLength < 0 || int64(s.sc.rd.buffered()) < s.contentLength))
}

// serveH1 serves the request startH1 started; it reports whether the connection may carry
// another request.
func (s *stream) serveH1() bool {
	h, sc := s.h, s.sc
	s.resp = s.respStore
	clearMap(s.resp)
	h.stats.rq.On(s.line).http1.Add(1)
	sc.rd.line = s.line // the connection's next reads count on this request's line
	s.process()
	if s.bodyStopped.Swap(false) {
		sc.nc.SetReadDeadline(sc.deadline) // the interrupted body read is over
	}
	s.wbuf = s.hw.buf
	s.bytesIn = s.hbody.read
	if s.body != nil && !s.hbody.done {
		sc.ended = 0 // the drain may wait for the client: the idle period starts later
	}
	if s.body != nil && !s.hbody.done && !s.hbody.drain(maxDrainedBody) {
		s.closeConn = true
		sc.linger = true // the client may still be sending the body
	}
	if maxRq := h.cfg.MaxRequestsPerConnection; maxRq > 0 && sc.requests >= maxRq {
		h.stats.DownstreamCxMaxRequestsReached.Inc()
		s.closeConn = true
	}
	if s.idle.fired.Load() && s.idle.cutWrite() { // only a fired timer cuts: no lock per request
		s.closeConn = true // its write deadline is in the past
	}
	return !s.closeConn && s.hw.err == nil
}

// serveH2 serves one HTTP/2 stream.
func (s *stream) serveH2(c *h2conn, w *h2stream, r *http.Request) {
	h := c.h
	s.begin(h)
	s.h2w = w
	s.in.keys = w.keys // loose (begin), but with the names newRequest put in the map
	if w.listExact {
		// Exact with the fields in their order, copied (the h2stream's list is the connection
		// reader's to refill); not lazy: the map is filled.
		s.in.fields, s.in.exact = append(s.in.fields[:0], w.list...), true
	}
	s.ctx.setup(h.sh, r.Context())
	s.remote, s.remoteIP, s.local, s.tls = c.remote, c.remoteIP, c.local, c.tls
	s.restored, s.direct = c.restored, c.direct
	s.connID, s.conn = c.lc.ID(), c.lc
	s.state.Reset(c.lc.FilterState())
	s.drain = c
	s.proto = "HTTP/2"
	s.head = r.Method == http.MethodHead
	path := r.RequestURI
	if path == "" {
		path = r.URL.RequestURI()
	}
	path = s.h2Upgrade(r, path)
	s.setRequest(r.Host, path, r.Method, r.Header)
	if s.tls {
		s.req.Scheme = "https"
	}
	// Hop-by-hop headers are not allowed in HTTP/2 requests; the reader rejects them. TE may
	// be "trailers" only, and is not forwarded.
	if s.in.keys&teKey.bit != 0 { // the map's deletion, a call, only when it may hold TE
		delete(r.Header, hdrTE)
	}
	s.body, s.contentLength = nil, 0
	// Every request has a Body; ContentLength is 0 when the HEADERS frame ended the stream or
	// content-length was 0 (the reader rejects DATA beyond it), -1 when a body of unknown
	// length follows. A request without a body is forwarded without one: a streamed empty body
	// costs an extra DATA frame and flush upstream, and turns an HTTP/1 GET into a chunked one.
	// The length first: comparing Body with NoBody is a call.
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody && s.upgrade == "" {
		s.body, s.contentLength = r.Body, r.ContentLength
		s.armH2RequestTimeout(w)
		s.watchBody()
	}
	s.resp = w.Header()
	s.h2req = r
	h.stats.rq.On(s.line).http2.Add(1)
	s.process()
}

// process runs a request through the HTTP filters and the router and accounts for it.
func (s *stream) process() {
	h := s.h
	st := h.stats
	st.rq.On(s.line).total.Add(1)
	st.DownstreamRqActive.IncOn(s.line)
	s.prepareRequest()
	if h.trace != nil {
		s.looseHeader() // the tracer writes the map
		s.startTrace()
	}
	// The exchange is the filters' alone (sendHead's loop runs over h.filters too, or the
	// ECDS chain pinned from them): without any it is not set (about 18 instructions). putStream
	// left it zero: its five fields are set one by one (assigning the whole struct was about
	// 100 instructions a request).
	if len(h.filters) > 0 {
		s.fx.Request, s.fx.Routes, s.fx.Downstream, s.fx.ClientIP, s.fx.FilterState = &s.req, routeDiscovery{h}, s, s.clientIP, &s.state
	}
	routed := true
	filters := h.filters
	if len(h.ecds) > 0 {
		filters = s.pinFilters(filters)
	}
	if h.ov.StopAcceptingRequests() {
		s.shedRequest()
		routed, filters = false, nil
	}
	if s.reject != 0 && routed {
		s.refuse()
		routed, filters = false, nil
	}
	if len(filters) > 0 {
		s.looseHeader() // the filters may change the map
	}
	if len(filters) > 0 && h.disablesFilters() {
		// Envoy has the route before the filters run, and skips those it disables.
		s.skip = h.route(&s.req)
	}
	for i, f := range filters {
		if s.skip != nil && s.skip.FilterDisabled(h.filterNames[i]) {
			continue
		}
		if sf, ok := f.(filter.StreamFilter); ok {
			s.openFilterStream(sf)
		}
		r := f.OnRequest(&s.fx)
		s.flags |= s.fx.Flags
		if r != nil {
			s.flags |= r.Flags
			s.details = r.Details
			s.replyHeader = r.Header
			s.localReply(r.Status, []byte(r.Body), nil)
			routed = false
			break
		}
		if s.gone { // the client went away while the filter paused the request
			routed = false
			break
		}
	}
	s.startIsNow = len(filters) == 0 && s.body == nil
	if rws := s.fx.RequestRewriters(); routed && len(rws) > 0 && s.body != nil && s.upgrade == "" {
		s.rewriteRequest(rws)
	}
	if routed {
		s.routeRequest()
	}
	if !s.headSent && !s.gone {
		s.localReply(http.StatusInternalServerError, nil, nil) // unreachable in practice
	}
	s.idle.disarm()
	if len(s.rwClosers) > 0 {
		s.closeRewriters()
	}
	if len(s.fstreams) > 0 {
		s.endFilterStreams()
	}
	st.DownstreamRqActive.DecOn(s.line)
	end := s.endAt
	if end == 0 {
		end = h.sh.stamps.Now()
	}
	if s.sc != nil {
		s.sc.ended = end
	}
	st.DownstreamRqTime.RecordOn(uint64(time.Duration(end-s.startAt).Milliseconds()), s.line)
	if s.tr.active {
		s.finishTrace(s.timeAt(end))
	}
	if len(h.logs) > 0 {
		s.log(end)
	}
}

// Connection is the stream's downstream connection as filters see it (filter.Exchange.Connection).
func (s *stream) Connection() filter.Connection {
	var c filter.Connection
	c.DirectRemote, _ = netip.ParseAddrPort(s.remote)
	c.Remote, _ = netip.ParseAddrPort(s.client)
	c.Local, _ = netip.ParseAddrPort(s.local)
	c.Protocol = s.proto
	var info *accesslog.TLSInfo
	if info, c.ServerName = s.downstreamTLS(); info != nil {
		c.TLS = &info.State
	}
	return c
}

// refuse answers a request the connection manager's HTTP/1 options refuse, before any filter
// sees it, as Envoy's codec and connection manager do.
func (s *stream) refuse() {
	var body []byte
	switch s.reject {
	case http.StatusUpgradeRequired:
		body = []byte(http.StatusText(s.reject)) // Envoy's codec errors name their status
	case http.StatusNotFound:
		s.h.stats.DownstreamRqNonRelativePath.Inc()
	}
	s.details = s.rejectDetails
	s.localReply(s.reject, body, nil)
}

// shedRequest answers a new request with 503 while the overload action
// stop_accepting_requests holds, before any filter or the router sees it, as Envoy does.
func (s *stream) shedRequest() {
	s.h.stats.DownstreamRqOverloadClose.Inc()
	s.flags |= accesslog.OverloadManager
	s.details = "overload"
	s.localReply(http.StatusServiceUnavailable, []byte(bodyOverloaded), nil)
}

// prepareRequest applies the connection manager's request header rules: x-forwarded-for and
// x-envoy-internal with use_remote_address, x-forwarded-proto and x-request-id.
func (s *stream) prepareRequest() {
	cfg := s.h.cfg
	s.client, s.clientIP = s.remote, s.remoteIP
	// Without x-forwarded-for there is no entry to take (a call of about 20 instructions).
	if xff := s.inboundKey(lookupKeys.xff); len(xff) > 0 {
		if ip, ok := xffClient(xff, cfg.UseRemoteAddress, cfg.XffNumTrustedHops); ok {
			var b [64]byte
			if text := ip.AppendTo(b[:0]); string(text) != s.remoteIP {
				s.clientIP = s.arenaString(text)
				s.client = s.arenaString(netip.AddrPortFrom(ip, 0).AppendTo(b[:0])) // Envoy prints port 0
			}
		}
	}
	internal := false
	if cfg.UseRemoteAddress {
		if !cfg.SkipXffAppend {
			if old := s.inbound(hdrXFF); len(old) > 0 {
				hd := s.changeHeader()
				hd[hdrXFF] = []string{old[len(old)-1] + ", " + s.remoteIP}
				if len(old) > 1 {
					hd[hdrXFF] = []string{joinComma(old) + ", " + s.remoteIP}
				}
			} else {
				s.setReqHeader(hdrXFF, s.remoteIP)
			}
		}
		internal = isInternalAddress(s.clientIP)
		for _, k := range [...]string{hdrEnvoyInternal, hdrExternalAddress} {
			if s.inbound(k) != nil { // the client's: only Legate sets them
				delete(s.changeHeader(), k)
			}
		}
		if internal {
			s.setReqHeader(hdrEnvoyInternal, "true")
		} else {
			s.setReqHeader(hdrExternalAddress, s.clientIP)
		}
		s.setReqHeader(hdrXFProto, s.req.Scheme)
	} else if len(s.inboundKey(lookupKeys.xfProto)) == 0 {
		s.putReqHeaderKey(lookupKeys.xfProto, s.req.Scheme, false)
	}
	s.edge = cfg.UseRemoteAddress && !internal
	// One lookup of x-request-id serves the decision and the stream's requestID.
	v := s.inboundKey(lookupKeys.requestID)
	if cfg.GenerateRequestID && (len(v) == 0 || v[0] == "" || (s.edge && !cfg.PreserveExternalRequestID)) {
		s.requestID = s.newRequestID()
		s.putReqHeaderKey(lookupKeys.requestID, s.requestID, len(v) > 0)
	} else if len(v) > 0 {
		s.requestID = v[0]
	}
}

// xffClient returns the client address x-forwarded-for (xff, as received) vouches for, as
// Envoy derives the downstream remote address: with use_remote_address the socket's peer is
// trusted, and xff_num_trusted_hops N > 0 trusts the N addresses the trusted proxies appended
// to XFF, taking the Nth from the right; without use_remote_address the (N+1)th from the right
// is taken. ok is false when there is no such entry or it is not an IP address (the socket's
// peer then stands).
func xffClient(xff []string, useRemote bool, trusted uint32) (ip netip.Addr, ok bool) {
	skip := int(trusted) // entries to pass over from the right
	if useRemote {
		if trusted == 0 {
			return ip, false
		}
		skip--
	}
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for v != "" {
			j := strings.LastIndexByte(v, ',')
			entry := strings.Trim(v[j+1:], " \t")
			if j < 0 {
				v = ""
			} else {
				v = v[:j]
			}
			if skip > 0 {
				skip--
				continue
			}
			a, err := netip.ParseAddr(entry)
			return a, err == nil
		}
	}
	return ip, false
}

func joinComma(vs []string) string {
	n := 0
	for _, v := range vs {
		n += len(v) + 2
	}
	b := make([]byte, 0, n)
	for i, v := range vs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, v...)
	}
	return string(b)
}

// setReqHeader sets a request header with one value without allocating the value slice.
func (s *stream) setReqHeader(key, value string) {
	s.putReqHeader(key, value, s.in.exact && s.inbound(key) != nil)
}

// putReqHeader is setReqHeader where the caller knows whether the request has key (present;
// a lookup less).
func (s *stream) putReqHeader(key, value string, present bool) {
	s.putReqHeaderKey(lookupKey{key, nameBit(key)}, value, present)
}

// putReqHeaderKey is putReqHeader for a key whose bit is known.
func (s *stream) putReqHeaderKey(k lookupKey, value string, present bool) {
	if present && s.in.exact {
		s.changeHeader() // the value replaces the request's own
	}
	s.in.addKey(k, value)
	if !s.in.lazy {
		s.setHeader(s.req.Header, k.name, value)
	}
}

// inbound returns key's values in the inbound request header (nil without a lookup when
// s.in says the request has no such header).
func (s *stream) inbound(key string) []string { return s.inboundKey(lookupKey{key, nameBit(key)}) }

// inboundKey is inbound for a key whose bit is known (inlined: see lookupKey).
func (s *stream) inboundKey(k lookupKey) []string {
	if s.in.keys&k.bit == 0 {
		return nil
	}
	return s.inboundLookup(k.name)
}

// inboundLookup is inbound past the filter. It is not inlined, which would put inboundKey
// over the inliner's budget.
//
//go:noinline
func (s *stream) inboundLookup(key string) []string {
	if s.in.lazy {
		return s.in.values(key, &s.vals)
	}
	return s.req.Header[key]
}

// header returns the inbound request header's map, filled (inIndex.lazy).
func (s *stream) header() http.Header {
	if s.in.lazy {
		s.req.Fill = nil
		s.in.fill(s.req.Header, &s.vals)
	}
	return s.req.Header
}

// fillReqHeader fills the inbound request header's map for the route table
// (route.Request.Fill).
func (s *stream) fillReqHeader() { s.header() }

// changeHeader returns the inbound request header's map, filled, for a change its index
// does not follow (inIndex.changed).
func (s *stream) changeHeader() http.Header {
	hd := s.header()
	s.in.changed()
	return hd
}

// looseHeader gives the inbound request header's map, filled, to consumers that may change it
// (inIndex.loose).
func (s *stream) looseHeader() {
	s.header()
	s.in.loose()
}

// setHeader sets a header of h with one value, kept in the stream's value storage.
func (s *stream) setHeader(h http.Header, key, value string) {
	s.vals = append(s.vals, value)
	n := len(s.vals)
	h[key] = s.vals[n-1 : n : n]
}

// setRespHeader is setReqHeader for the response.
func (s *stream) setRespHeader(key, value string) {
	s.respVals = append(s.respVals, value)
	n := len(s.respVals)
	s.resp[key] = s.respVals[n-1 : n : n]
}

// arenaString copies b into the stream's arena and returns it as a string valid for the
// stream's lifetime. HTTP/2 streams use it too: Legate's HPACK encoders (internal/h2wire,
// downstream and upstream) keep no dynamic table, so no string outlives the stream's frames.
func (s *stream) arenaString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(s.arena)-len(s.arena) < len(b) {
		s.arena = make([]byte, 0, max(2*cap(s.arena), len(b), 1024))
	}
	start := len(s.arena)
	s.arena = append(s.arena, b...)
	return bytesString(s.arena[start:])
}

// newRequestID makes a random UUID version 4 (Envoy's x-request-id), in the arena.
func (s *stream) newRequestID() string {
	a, c := rand.Uint64(), rand.Uint64()
	if cap(s.arena)-len(s.arena) < uuidLen {
		s.arena = make([]byte, 0, max(2*cap(s.arena), 1024)) // as arenaString grows it
	}
	start := len(s.arena)
	s.arena = appendUUID(s.arena, a, c)
	return bytesString(s.arena[start:])
}

const uuidLen = 36

// appendUUID appends the version 4 UUID of the random words a and c (their version and
// variant bits set) to dst, which has room for it: written in place, eight or four digits at
// once (hexDigits8), rather than made in an array and copied (about 100 instructions more).
func appendUUID(dst []byte, a, c uint64) []byte {
	a = a&^(0xf<<12) | 4<<12   // version 4
	c = c&^(0x3<<62) | 0x2<<62 // variant 10
	n := len(dst)
	b := dst[n : n+uuidLen]
	be := binary.BigEndian
	be.PutUint64(b[0:8], hexDigits8(uint32(a>>32)))
	lo := hexDigits8(uint32(a))
	be.PutUint32(b[9:13], uint32(lo>>32))
	be.PutUint32(b[14:18], uint32(lo))
	hi := hexDigits8(uint32(c >> 32))
	be.PutUint32(b[19:23], uint32(hi>>32))
	be.PutUint32(b[24:28], uint32(hi))
	be.PutUint64(b[28:36], hexDigits8(uint32(c)))
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return dst[:n+uuidLen]
}

// hexDigits8 returns the eight hex digits of x as the bytes of a word, the most significant
// digit in its top byte.
func hexDigits8(x uint32) uint64 {
	const ones = 0x0101010101010101
	n := uint64(x)
	n = (n | n<<16) & 0x0000ffff0000ffff
	n = (n | n<<8) & 0x00ff00ff00ff00ff
	n = (n | n<<4) & 0x0f0f0f0f0f0f0f0f
	over9 := (n + 6*ones) >> 4 & ones
	return n + '0'*ones + over9*('a'-'0'-10)
}

// addDownstreamCookie generates the cookie of a cookie hash policy with a ttl when the request
// has none, as Envoy does: its value is the hex xxHash64 of the connection's remote and local
// addresses (so streams of one connection agree), and the response carries
// `name="value"; Max-Age=<ttl s>; Path=<path>; HttpOnly`.
func (s *stream) addDownstreamCookie(name, path string, ttl time.Duration) string {
	var b [16]byte
	sum := xxhash.Sum64String(s.remote + s.local)
	const hexDigits = "0123456789abcdef"
	for i := range 16 {
		b[i] = hexDigits[(sum>>(60-4*i))&0xf]
	}
	value := string(b[:])
	c := name + `="` + value + `"`
	if secs := int64(ttl / time.Second); secs != 0 {
		c += "; Max-Age=" + strconv.FormatInt(secs, 10)
	}
	if path != "" {
		c += "; Path=" + path
	}
	s.setCookies = append(s.setCookies, c+"; HttpOnly")
	return value
}

// isInternalAddress reports whether ip is loopback or private (RFC 1918, RFC 4193), which
// Envoy treats as internal with use_remote_address.
func isInternalAddress(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return a.IsLoopback() || a.IsPrivate()
}

// localReply answers with a locally generated response (Envoy's sendLocalReply): text/plain
// body, content-length, and the route's response header mutations when m is set.
func (s *stream) localReply(status int, body []byte, m *route.Match) {
	if st, b, ok := s.requestTimedOut(); ok {
		status, body, m = st, b, nil
	}
	if s.headSent {
		s.closeConn = true
		return
	}
	keep := s.resp[hdrOverloaded]
	loc := s.resp[hdrLocation]
	clear(s.resp)
	s.respSpelled = false
	if keep != nil {
		s.resp[hdrOverloaded] = keep
	}
	if loc != nil {
		s.resp[hdrLocation] = loc
	}
	if len(body) > 0 && len(s.replyHeader[hdrContentType]) == 0 { // a filter's reply may name its own
		s.setRespHeader(hdrContentType, textPlain)
	}
	for k, vs := range s.replyHeader {
		s.resp[k] = append(s.resp[k], vs...)
	}
	s.replyHeader = nil
	s.headBody = bytes.NewReader(body)
	s.sendHead(status, int64(len(body)), m)
	switch {
	case s.held:
		s.writeBody(s.heldBody)
		s.emitTrailers()
	case s.respRW != nil:
		s.writeRewritten(body)
	case len(body) > 0:
		s.writeBody(body)
	}
	s.finish()
}

// sendHead applies the response header rules and writes the status line and headers.
// contentLength < 0 means unknown (chunked in HTTP/1.1, until close in HTTP/1.0).
func (s *stream) sendHead(status int, contentLength int64, m *route.Match) {
	h := s.h
	cfg := h.cfg
	s.status = status
	s.headSent = true
	// A direct head (headDirect) has no response header mutations, filters, span or filter
	// streams: none of their work is looked for (about 30 instructions).
	if !s.respDirect {
		if m != nil && m.HasResponseHeaderOps() {
			s.fillEntryBasics() // what the mutations' formatters may read
			m.FinalizeResponseHeaders(s.resp, &s.entry)
		}
		filters := h.filters
		if len(s.chain) > 0 {
			filters = s.chain
		}
		s.fx.Status, s.fx.ResponseLength = status, contentLength
		for i, f := range filters {
			if s.skip != nil && s.skip.FilterDisabled(h.filterNames[i]) {
				continue
			}
			f.OnResponse(&s.fx, s.resp)
		}
		if s.tr.active {
			s.decorateResponse()
		}
		if rws := s.fx.ResponseRewriters(); len(rws) > 0 && s.mayRewriteResponse(status) {
			s.respRW, contentLength = rws, -1 // the rewritten body's length is not known
			if s.fx.ResponseHeadersHeld() && s.headBody != nil {
				contentLength = s.holdResponse()
			}
		}
		if st := s.fx.Status; st != status && st >= 100 && st <= 999 {
			status = st // a filter changed :status
		}
	}
	s.status = status
	// Counted before the response leaves, so that a client that has read it sees the stats.
	h.stats.responseCode(status, s.line)
	h.lstats.responseCode(status, s.line)
	if !s.respDirect { // appendDirectHead adds these
		switch cfg.ServerHeader {
		case config.ServerHeaderOverwrite:
			s.setRespHeader(hdrServer, cfg.ServerName)
		case config.ServerHeaderAppendIfAbsent:
			if len(s.resp[hdrServer]) == 0 {
				s.setRespHeader(hdrServer, cfg.ServerName)
			}
		}
		s.setRespHeader(hdrDate, h.sh.dates.get(s.start))
		if cfg.AlwaysSetRequestIDInResponse && s.requestID != "" {
			s.setRespHeader(hdrRequestID, s.requestID)
		}
		for _, fs := range s.fstreams {
			fs.ResponseHeaders(status, s.resp)
		}
	}
	if s.h2w != nil {
		if s.respDirect {
			s.h2w.pre = s.appendDirectHeadH2(s.h2w.pre[:0], m)
		}
		s.sendHeadH2(status, contentLength)
		return
	}
	if !s.closeConn && s.drain.DrainClose() {
		s.closeConn = true
		h.stats.DownstreamCxDrainClose.Inc()
	}
	if !s.closeConn && h.ov.DisableKeepalive() {
		s.closeConn = true
		h.stats.DownstreamCxOverloadDisableKeepalive.Inc()
	}
	w := &s.hw
	w.noBody = s.head || status < 200 || status == http.StatusNoContent || status == http.StatusNotModified
	w.buf = appendStatusLine(w.buf, max(s.minor, 0), status)
	if s.respDirect {
		w.buf = s.appendDirectHead(w.buf, m) // s.resp is empty
	} else {
		w.buf = s.appendMappedHead(w.buf)
	}
	own := s.respCase()
	switch {
	case status < 200 || status == http.StatusNoContent:
	case s.tunnel: // the tunnel's bytes follow the head unframed
	case contentLength >= 0:
		name := "content-length: " // the name and its separator in one copy
		if own == config.HeaderCaseProper {
			name = "Content-Length: " // as config.AppendLowerName writes it
		}
		w.buf = append(w.buf, name...)
		w.buf = strconv.AppendInt(w.buf, contentLength, 10)
		w.buf = append(w.buf, '\r', '\n')
	case s.minor == 0:
		s.closeConn = true // the body ends when the connection closes
	case !w.noBody:
		w.chunked = true
		w.buf = config.AppendLowerName(w.buf, "transfer-encoding", own)
		w.buf = append(w.buf, ": chunked\r\n"...)
	}
	if !s.closeConn && !s.tunnel && s.bodyLeftUndrained() {
		s.closeConn = true
	}
	if s.closeConn && !s.tunnel {
		w.buf = config.AppendLowerName(w.buf, "connection", own)
		w.buf = append(w.buf, ": close\r\n"...)
	}
	w.buf = append(w.buf, '\r', '\n')
}

// bodyLeftUndrained reports, as an HTTP/1 response head is written, that the request body has
// not ended (the upstream answered early, or the answer is local) and is larger than the
// connection drains to carry another request: the connection closes after the response.
func (s *stream) bodyLeftUndrained() bool {
	return s.body != nil && !s.bodyEnded() && (s.contentLength < 0 || s.contentLength > maxDrainedBody)
}

// stopBodyRead ends a read of the request body that waits for the client: the upstream
// answered before the body was sent whole (pool.Request.InterruptBody, called on a pool or
// http2 goroutine while the stream waits on the exchange). An HTTP/2 body is closed (the
// stream then ends with RST_STREAM NO_ERROR); an HTTP/1 read is woken by an expired read
// deadline.
func (s *stream) stopBodyRead() {
	switch {
	case s.h2req != nil:
		s.h2req.Body.Close()
	case s.sc != nil:
		s.bodyStopped.Store(true)
		s.sc.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// appendMappedHead appends the header lines of the response header map.
func (s *stream) appendMappedHead(dst []byte) []byte {
	for k, vs := range s.resp {
		for _, v := range vs {
			dst = s.appendRespName(dst, k)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, '\r', '\n')
		}
	}
	return dst
}

func (s *stream) sendHeadH2(status int, contentLength int64) {
	// x/net/http2 answers "Connection: close" with a graceful GOAWAY and strips it.
	switch {
	case s.drain.DrainClose():
		s.setRespHeader(hdrConnection, "close")
		s.h.stats.DownstreamCxDrainClose.Inc()
	case s.h.ov.DisableKeepalive():
		s.setRespHeader(hdrConnection, "close")
		s.h.stats.DownstreamCxOverloadDisableKeepalive.Inc()
	}
	if contentLength >= 0 && !s.head && status >= 200 && status != http.StatusNoContent {
		if s.respDirect {
			// Encoded after the direct head's other fields, where the map's would be: the
			// map's assignment and its range when the head is written, and the number's
			// string, were about 600 instructions a request.
			var b [20]byte
			n := strconv.AppendInt(b[:0], contentLength, 10)
			s.h2w.pre = h2wire.AppendIndexedName(s.h2w.pre, contentLengthIndex, bytesString(n))
			s.h2w.preLength = true
		} else {
			s.setRespHeader("Content-Length", s.itoa(contentLength))
		}
	}
	s.h2w.WriteHeader(status)
}

// teKey is TE's lookup key, whose bit serveH2 tests.
var teKey = newLookupKey(hdrTE)

// contentLengthIndex is content-length's HPACK static table index.
var contentLengthIndex = h2wire.StaticName(hdrContentLength)

// respCase is the case of the HTTP/1 response's names that have no recorded spelling: the
// upstream's preserve_case formatter travels with the response it read (as in Envoy), else
// the connection manager's header_key_format applies.
func (s *stream) respCase() config.HeaderCase {
	if s.respSpelled {
		return s.respOthers
	}
	return s.h.cfg.HTTP1.StatelessCase()
}

// appendRespName appends a response header name as the downstream HTTP/1 codec writes it.
func (s *stream) appendRespName(dst []byte, k string) []byte {
	if s.respSpelled {
		if n, ok := spelling(s.respNames, k); ok {
			return append(dst, n...)
		}
	}
	return config.AppendName(dst, k, s.respCase())
}

// spelling finds how a recorded name list spells k.
func spelling(names []string, k string) (string, bool) {
	for _, n := range names {
		if len(n) == len(k) && http1.EqualFold(n, k) {
			return n, true
		}
	}
	return "", false
}

// writeBody sends body bytes downstream.
func (s *stream) writeBody(p []byte) error {
	if !s.head { // a HEAD response carries no body, so filters see none
		for _, fs := range s.fstreams {
			fs.ResponseBody(p)
		}
	}
	s.bytesOut += int64(len(p))
	if s.h2w != nil {
		_, err := s.h2w.Write(p)
		return err
	}
	_, err := s.hw.Write(p)
	return err
}

// copyBody streams the upstream response's body downstream, through the filters' rewriters
// when they asked for any (then a response without a body is rewritten from an empty one).
func (s *stream) copyBody(resp *pool.Response) (int64, error) {
	if s.h2w == nil && s.respRW == nil && len(s.fstreams) == 0 && !s.hw.chunked && !s.hw.noBody {
		// Nothing watches the body: the copy reads it itself, as observedBody would.
		n, err := s.hw.copyFrom(resp.Body, resp, true, &s.respObserved.err)
		s.bytesOut += n
		return n, err
	}
	var r io.Reader = &s.respObserved
	cl := resp.ContentLength
	if s.respRW == nil {
		s.respObserved = observedBody{r: resp.Body, s: s, response: true}
	} else {
		body := resp.Body
		if body == nil {
			body = http.NoBody
		}
		s.respObserved = observedBody{r: body, s: s, response: true, quiet: true}
		r, cl = s.rewriteResponse(r, resp, true), -1
		s.hw.stamped = false // a rewriter may read on, and wait, within one read of it
	}
	if s.h2w != nil {
		n, err := s.copyBodyH2(r, resp, cl)
		s.bytesOut += n
		return n, err
	}
	n, err := s.hw.copyFrom(r, resp, s.respRW == nil, nil)
	s.bytesOut += n
	return n, err
}

// copyBodyH2 copies an upstream body to an HTTP/2 stream. The stream buffers what the
// handler writes, headers included, until a flush, a frame's worth or the handler's end; so that a streamed response
// (gRPC, server-sent events, a slow upstream) reaches the client as it arrives, as Envoy
// forwards it, what was written is flushed whenever the next read may have to wait for the
// upstream. A response whose body is already buffered (a small HTTP/1 response) goes out
// whole at the handler's end: HEADERS and DATA with END_STREAM in one write.
func (s *stream) copyBodyH2(r io.Reader, resp *pool.Response, cl int64) (int64, error) {
	// The copy buffer lives with the pooled stream, not on the stack: an 8 KiB array would
	// make handler goroutines grow and copy their stacks.
	if s.h2copy == nil {
		s.h2copy = make([]byte, h2CopyBuffer)
	}
	// The headers wait for the first body bytes when the body has a known length and comes
	// from an HTTP/2 upstream (whose buffering the pool cannot see): such a body follows its
	// headers at once, and one write then carries both. Without a body the handler's end
	// sends HEADERS with END_STREAM (a gRPC trailers-only response must stay one frame).
	if cl != 0 && !(resp.HTTP2 && cl > 0) && !resp.BodyReady() {
		s.h2w.Flush()
	}
	var total int64
	for {
		n, err := r.Read(s.h2copy)
		if n > 0 {
			// Writes and flushes wait while the client grants no window (streamIdle.writing).
			s.idle.writing.Store(true)
			_, werr := s.h2w.Write(s.h2copy[:n])
			if werr == nil && (cl < 0 || total+int64(n) < cl) && err == nil && !resp.BodyReady() {
				werr = s.h2w.FlushError()
			}
			s.idle.writing.Store(false)
			if werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// finish completes the response.
func (s *stream) finish() {
	if len(s.fstreams) > 0 {
		// The filters' streams end before the response's last bytes leave, so that what they
		// produce (a tap trace file) exists once the client has the whole response.
		s.endFilterStreams()
	}
	if s.h2w != nil {
		return
	}
	s.hw.finish()
}

// fillEntryBasics fills the access-log fields header formatters may read.
func (s *stream) fillEntryBasics() {
	e := &s.entry
	s.entryUsed = true
	e.StartTime = s.start
	e.Method, e.Path, e.Authority, e.Scheme = s.req.Method, s.req.Path, s.req.Authority, s.req.Scheme
	e.RequestHeaders = s.header()
	if s.forwarded {
		e.Path, e.Authority, e.RequestHeaders = s.outPath, s.outAuthority, s.out.header()
	}
	e.Protocol = s.proto
	e.DownstreamRemoteAddress = s.client
	if s.client == "" { // answered before the request's headers were applied
		e.DownstreamRemoteAddress = s.remote
	}
	e.DownstreamDirectRemoteAddress = s.direct
	e.DownstreamLocalAddress = s.local
	e.ConnectionID = s.connID
	e.FilterState = &s.state
	e.DownstreamTLS, e.RequestedServerName = s.downstreamTLS()
	e.UpstreamHost = s.upstream
	e.UpstreamCluster = s.cluster
	if s.match != nil && s.match.Route != nil {
		e.RouteName = s.match.Route.Name
	}
}

// log writes the access-log lines of the finished request.
func (s *stream) log(end int64) {
	s.fillEntryBasics()
	e := &s.entry
	e.ResponseHeaders = s.resp
	e.ResponseTrailers = s.respTrailers
	e.ResponseCode = s.status
	e.ResponseCodeDetails = s.details
	e.ResponseFlags = s.flags
	e.BytesReceived, e.BytesSent = uint64(s.bytesIn), uint64(s.bytesOut)
	e.Duration = time.Duration(end - s.startAt)
	e.RequestDuration = s.requestDuration()
	if s.upRx != 0 {
		e.ResponseDuration = recorded(time.Duration(s.upRx - s.startAt))
		e.ResponseTxDuration = recorded(time.Duration(end - s.upRx))
	}
	e.UpstreamRequestAttemptCount = s.attempts
	e.HealthCheck = s.fx.HealthCheck
	e.DynamicMetadata = s.fx.Metadata
	for i := range s.h.logs {
		s.logBuf = s.h.logs[i].log(e, s.logBuf)
	}
}

// requestDuration is from the request's start to its last byte: the body's end, or the head
// for a request without a body; zero (printed "-") while a body has not ended.
func (s *stream) requestDuration() time.Duration {
	if s.clock.r == nil {
		return recorded(0)
	}
	if at := s.reqEnd.Load(); at != 0 {
		return recorded(time.Duration(at - s.startAt))
	}
	return 0
}

// timeAt is the time of stamp at, one of the stream's: its start's reading moved on by the
// time between them, so that a date printed for it (a span's events) is the start's wall
// time on the monotonic clock's count, as each reading of the system clock gives it.
func (s *stream) timeAt(at int64) time.Time { return s.start.Add(time.Duration(at - s.startAt)) }

// recorded keeps a measured duration from reading as "not recorded" (zero) when the clock did
// not move: it prints as 0 ms.
func recorded(d time.Duration) time.Duration { return max(d, 1) }

// openFilterStream asks a stream filter for its Stream of this request. The first one also
// routes the request body (and, for HTTP/1, the chunked trailer section) through the stream
// so the filters see them as the router reads them.
func (s *stream) openFilterStream(sf filter.StreamFilter) {
	fs := sf.NewStream(&s.fx)
	if fs == nil {
		return
	}
	s.fstreams = append(s.fstreams, fs)
	if len(s.fstreams) > 1 || s.body == nil {
		return
	}
	s.reqObserved = observedBody{r: s.body, s: s}
	s.body = &s.reqObserved
	if s.sc != nil && s.h.cfg.HTTP1.EnableTrailers {
		s.hbody.trailer = s.keepTrailer
	}
}

// endFilterStreams ends the filters' streams and forgets them. An HTTP/1 body read to its end
// by a reader that stopped at its length still reports its trailers here.
func (s *stream) endFilterStreams() {
	if s.sc != nil && s.body != nil && s.hbody.done {
		s.requestBodyEnded()
	}
	for i, fs := range s.fstreams {
		fs.End()
		s.fstreams[i] = nil
	}
	s.fstreams = s.fstreams[:0]
	s.hbody.trailer = nil
}

// requestBodyEnded reports the request trailers, when there are any, once the request body
// has been read to its end.
func (s *stream) requestBodyEnded() {
	if s.trailersOut {
		return
	}
	s.trailersOut = true
	t := s.trailers
	if s.h2req != nil {
		t = s.h2req.Trailer
	}
	if len(t) == 0 {
		return
	}
	for _, fs := range s.fstreams {
		fs.RequestTrailers(t)
	}
}

// addTrailer keeps one line of an HTTP/1 chunked trailer section ("name: value") for the
// upstream request and the filters' streams. Malformed lines, framing fields and lines past
// max_headers_count are dropped (RFC 9110 §6.5.1 lets a recipient discard trailer fields).
func (s *stream) addTrailer(line []byte) {
	limit, n := maxTrailerFields, 0
	if s.h != nil {
		limit = int(s.h.cfg.MaxHeadersCount)
	}
	for _, vs := range s.trailers {
		n += len(vs)
	}
	if n >= limit {
		return
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !http1.ValidToken(line[:colon]) || !http1.ValidValue(http1.TrimOWS(line[colon+1:])) {
		return
	}
	key := canonicalKey(s.arenaString(line[:colon]))
	switch key {
	case hdrContentLength, hdrTransferEncoding, hdrHost, hdrTrailer:
		return
	}
	s.trailers[key] = append(s.trailers[key], http1.TrimOWS(s.arenaString(line[colon+1:])))
}

// observedBody passes a body through and reports each chunk read to the filters' streams: the
// request body as the router reads it, the response body as it is copied downstream. It keeps
// the reader's failure, so that the router can tell an upstream reset from a downstream one.
type observedBody struct {
	r        io.Reader
	s        *stream
	response bool
	quiet    bool  // the upstream body under rewriters: the filters' streams see what they make
	err      error // the first error other than io.EOF
}

func (o *observedBody) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	eof := false // compared once: each comparison of two errors was about 20 instructions
	if err != nil {
		eof = err == io.EOF
		if !eof && o.err == nil {
			o.err = err
		}
	}
	if n > 0 {
		if o.response {
			o.s.idle.touchRead() // the bytes are on their way to the client
		}
		for _, fs := range o.s.fstreams {
			if o.quiet {
				break
			}
			if o.response {
				fs.ResponseBody(p[:n])
			} else {
				fs.RequestBody(p[:n])
			}
		}
	}
	if eof && !o.response {
		o.s.requestBodyEnded()
	}
	return n, err
}
