package compressor

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	zstdv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/compressor/v3"
	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Register registers the filter, its per-route configuration, and the compression libraries
// it builds from compressor_library.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &compressorv3.Compressor{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &compressorv3.CompressorPerRoute{},
	})
	b.Declare(registry.Compressor, GzipName, &gzipv3.Gzip{})
	b.Declare(registry.Compressor, BrotliName, &brotliv3.Brotli{})
	b.Declare(registry.Compressor, ZstdName, &zstdv3.Zstd{})
}

// ResponseStats are a filter's response stats, under
// http.<stat_prefix>.compressor.<library name>.<library>.response. (without "response." when
// response_direction_config is unset, as Envoy's legacy tree).
type ResponseStats struct {
	Compressed                   stats.Counter `stat:"compressed"`
	NotCompressed                stats.Counter `stat:"not_compressed"`
	TotalUncompressedBytes       stats.Counter `stat:"total_uncompressed_bytes"`
	TotalCompressedBytes         stats.Counter `stat:"total_compressed_bytes"`
	ContentLengthTooSmall        stats.Counter `stat:"content_length_too_small"`
	NoAcceptHeader               stats.Counter `stat:"no_accept_header"`
	HeaderIdentity               stats.Counter `stat:"header_identity"`
	HeaderCompressorUsed         stats.Counter `stat:"header_compressor_used"`
	HeaderCompressorOvershadowed stats.Counter `stat:"header_compressor_overshadowed"`
	HeaderWildcard               stats.Counter `stat:"header_wildcard"`
	HeaderNotValid               stats.Counter `stat:"header_not_valid"`
	NotCompressedEtag            stats.Counter `stat:"not_compressed_etag"`
}

// RequestStats are a filter's request stats, under
// http.<stat_prefix>.compressor.<library name>.<library>.request.
type RequestStats struct {
	Compressed             stats.Counter `stat:"compressed"`
	NotCompressed          stats.Counter `stat:"not_compressed"`
	TotalUncompressedBytes stats.Counter `stat:"total_uncompressed_bytes"`
	TotalCompressedBytes   stats.Counter `stat:"total_compressed_bytes"`
	ContentLengthTooSmall  stats.Counter `stat:"content_length_too_small"`
}

// Filter is one configured compressor filter. Immutable; safe for concurrent use.
type Filter struct {
	name     string
	cfg      *config
	ctx      *filter.Context
	resp     *ResponseStats
	req      *RequestStats
	releases []func()
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	var pb compressorv3.Compressor
	if err := filter.Decode(cfg, TypeURL, Name+": typed_config", &pb); err != nil {
		return nil, err
	}
	c, err := compile(&pb)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = &filter.Context{}
	}
	f := &Filter{name: Name, cfg: c, ctx: ctx}
	if ctx.Name != "" {
		f.name = ctx.Name
	}
	prefix := ctx.StatPrefix + "compressor." + c.lib.name + "." + c.lib.statPrefix + "."
	respPrefix := prefix + "response."
	if c.response.legacyStats {
		respPrefix = prefix
	}
	var release func()
	f.resp, release = filter.AcquireStats[ResponseStats](ctx.Stats, respPrefix)
	f.releases = append(f.releases, release)
	f.req, release = filter.AcquireStats[RequestStats](ctx.Stats, prefix+"request.")
	f.releases = append(f.releases, release)
	return f, nil
}

// Close drops the filter's hold on its stats.
func (f *Filter) Close() error {
	for _, r := range f.releases {
		r()
	}
	return nil
}

// chainKey keeps, per stream, what the chain's compressor filters share (chain).
type chainKey struct{}

// chain is what a stream's compressor filters share, as Envoy's filter state: the request's
// accept-encoding (read before any filter removes it), the filters in chain order, and the
// encoding chosen for the response once the first of them decided it.
type chain struct {
	accept    string
	hasAccept bool
	filters   []*Filter
	decided   bool
	choice    decision
}

// streamChain returns the stream's chain, made by the first compressor filter.
func streamChain(x *filter.Exchange, h http.Header) *chain {
	if c, ok := x.Kept(chainKey{}).(*chain); ok {
		return c
	}
	c := &chain{}
	if vs := h.Values("Accept-Encoding"); len(vs) > 0 {
		c.accept, c.hasAccept = strings.Join(vs, ","), true
	}
	x.Keep(chainKey{}, c)
	return c
}

// perRoute is the route's CompressorPerRoute, if any.
func (f *Filter) perRoute(x *filter.Exchange) *PerRoute {
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if p, ok := pc.Config.(*PerRoute); ok {
			return p
		}
	}
	return nil
}

// lib is the library that compresses this stream's response (the route's override, if any).
func (f *Filter) lib(p *PerRoute) *library {
	if p != nil && p.lib != nil {
		return p.lib
	}
	return f.cfg.lib
}

// OnRequest records the request's accept-encoding for the response, removes it when told to,
// and compresses the request body when request_direction_config allows.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	h := x.Request.Header
	c := streamChain(x, h)
	c.filters = append(c.filters, f)
	p := f.perRoute(x)
	remove := f.cfg.response.removeAccept
	if p != nil && p.RemoveAccept != nil {
		remove = *p.RemoveAccept
	}
	if remove && f.cfg.response.enabled.enabled(f.ctx) {
		h.Del("Accept-Encoding")
	}
	if d := f.cfg.request; d != nil {
		f.compressRequest(x, d)
	}
	return nil
}

// compressRequest compresses a request body of a compressible type and length that is not
// encoded yet, as Envoy's decodeHeaders decides it.
func (f *Filter) compressRequest(x *filter.Exchange, d *direction) {
	h := x.Request.Header
	if !d.enabled.enabled(f.ctx) || isUpgrade(x) || !f.requestLongEnough(h, d) || !d.typeAllowed(h) ||
		h.Get("Content-Encoding") != "" || !transferEncodingAllowed(h, f.cfg.lib.encoding) {
		f.req.NotCompressed.Inc()
		return
	}
	h.Del("Content-Length")
	h.Set("Content-Encoding", f.cfg.lib.encoding)
	f.req.Compressed.Inc()
	lib, st := f.cfg.lib, f.req
	x.RewriteRequestBody(func(src filter.Body) io.Reader {
		return &compressing{src: src, lib: lib, inBytes: &st.TotalUncompressedBytes, outBytes: &st.TotalCompressedBytes}
	})
}

// requestLongEnough: a request body of a known length is at least min_content_length; one of
// unknown length is chunked.
func (f *Filter) requestLongEnough(h http.Header, d *direction) bool {
	if v := h.Get("Content-Length"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < d.minLength {
			f.req.ContentLengthTooSmall.Inc()
			return false
		}
		return true
	}
	return hasToken(h.Values("Transfer-Encoding"), "chunked")
}

// OnResponse compresses the response when the request accepts the filter's encoding and the
// response is compressible, as Envoy's encodeHeaders decides it.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	c, _ := x.Kept(chainKey{}).(*chain)
	if c == nil { // the request did not pass this filter (a local reply before it)
		return
	}
	p := f.perRoute(x)
	r := &f.cfg.response
	lib := f.lib(p)
	enabledAndLong := r.enabled.enabled(f.ctx) && (p == nil || !p.Disabled) && f.responseLongEnough(x, r)
	compressible := enabledAndLong && r.typeAllowed(h) && !hasToken(h.Values("Cache-Control"), "no-transform") &&
		f.etagAllowed(h, r) && h.Get("Content-Encoding") == "" && !r.uncompressible[x.Status]
	if !endsAtHeaders(x) && enabledAndLong && f.acceptAllowed(x, c, h, lib) && compressible {
		sanitizeEtag(h, r.weakenEtag)
		insertVary(h)
		h.Del("Content-Length")
		h.Set("Content-Encoding", lib.encoding)
		f.resp.Compressed.Inc()
		st := f.resp
		x.RewriteResponseBody(func(src filter.Body) io.Reader {
			return &compressing{src: src, lib: lib, inBytes: &st.TotalUncompressedBytes, outBytes: &st.TotalCompressedBytes}
		})
		return
	}
	f.resp.NotCompressed.Inc()
	if compressible {
		// A cache in front must know that the resource comes compressed to other clients.
		insertVary(h)
	}
}

// endsAtHeaders reports a response without a body (Envoy's end_stream at encodeHeaders).
func endsAtHeaders(x *filter.Exchange) bool {
	return x.ResponseLength == 0 || x.Request.Method == http.MethodHead ||
		x.Status < 200 || x.Status == http.StatusNoContent || x.Status == http.StatusNotModified
}

// isUpgrade reports an upgrade or CONNECT request, whose body is a tunnel.
func isUpgrade(x *filter.Exchange) bool {
	return x.Request.Method == http.MethodConnect || x.Request.Header.Get("Upgrade") != ""
}

// responseLongEnough: a response of a known length is at least min_content_length (one of
// unknown length is streamed and compressed).
func (f *Filter) responseLongEnough(x *filter.Exchange, r *response) bool {
	if x.ResponseLength >= 0 && x.ResponseLength < r.minLength {
		f.resp.ContentLengthTooSmall.Inc()
		return false
	}
	return true
}

// etagAllowed: disable_on_etag_header refuses a response with an ETag, unless
// weaken_etag_on_compress overrides it.
func (f *Filter) etagAllowed(h http.Header, r *response) bool {
	if r.disableOnEtag && !r.weakenEtag && h.Get("Etag") != "" {
		f.resp.NotCompressedEtag.Inc()
		return false
	}
	return true
}

// typeAllowed: a message without a content-type, or whose media type is listed.
func (d *direction) typeAllowed(h http.Header) bool {
	ct := h.Get("Content-Type")
	if ct == "" || len(d.types) == 0 {
		return true
	}
	return d.types[mediaType(ct)]
}

// mediaType is a content-type without its parameters, lower case.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// transferEncodingAllowed: the message is not already compressed by its transfer coding.
func transferEncodingAllowed(h http.Header, encoding string) bool {
	for _, v := range h.Values("Transfer-Encoding") {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if strings.EqualFold(t, encoding) || strings.EqualFold(t, "gzip") || strings.EqualFold(t, "deflate") {
				return false
			}
		}
	}
	return true
}

// hasToken reports whether a comma-separated header lists token (case-insensitive).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// sanitizeEtag removes a strong ETag from a compressed response (its bytes changed), or
// weakens it when told to; a weak one stays.
func sanitizeEtag(h http.Header, weaken bool) {
	etag := h.Get("Etag")
	if len(etag) <= 2 || ((etag[0] == 'W' || etag[0] == 'w') && etag[1] == '/') {
		return
	}
	if weaken {
		h.Set("Etag", "W/"+etag)
		return
	}
	h.Del("Etag")
}

// insertVary adds accept-encoding to the response's vary, once.
func insertVary(h http.Header) {
	vs := h.Values("Vary")
	if hasToken(vs, "Accept-Encoding") {
		return
	}
	if len(vs) == 0 {
		h.Set("Vary", "Accept-Encoding")
		return
	}
	h.Set("Vary", strings.Join(vs, ", ")+", Accept-Encoding")
}

// bufPool holds the compressing readers' input buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// compressing is a body compressed as it is read: each read of the source is compressed and
// flushed (Envoy's Flush per data chunk), so a streamed body keeps streaming; the source's end
// finishes the stream. It counts the bytes in and out.
type compressing struct {
	src               filter.Body
	lib               *library
	enc               encoder
	buf               *[]byte
	pending           bytes.Buffer // compressed bytes not read yet
	done              bool
	inBytes, outBytes *stats.Counter
}

func (c *compressing) Read(p []byte) (int, error) {
	for c.pending.Len() == 0 {
		if c.done {
			return 0, io.EOF
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n, _ := c.pending.Read(p[:min(len(p), c.lib.chunk)])
	c.outBytes.Add(uint64(n))
	return n, nil
}

// fill compresses the source's next read.
func (c *compressing) fill() error {
	if c.enc == nil {
		enc, err := c.lib.get(&c.pending)
		if err != nil {
			return err
		}
		c.enc, c.buf = enc, bufPool.Get().(*[]byte)
	}
	n, err := c.src.Read(*c.buf)
	if n > 0 {
		c.inBytes.Add(uint64(n))
		if _, werr := c.enc.Write((*c.buf)[:n]); werr != nil {
			return werr
		}
	}
	switch {
	case err == io.EOF:
		c.done = true
		return c.enc.Close()
	case err != nil:
		return err
	case n > 0:
		return c.enc.Flush()
	}
	return nil
}

// Close gives the encoder and the buffer back once the connection manager is done with the
// body.
func (c *compressing) Close() error {
	if c.enc != nil {
		c.lib.put(c.enc)
		bufPool.Put(c.buf)
		c.enc, c.buf = nil, nil
	}
	return nil
}
