package decompressor

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/decompressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/decompressor/v3"
	zstdv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/decompressor/v3"
	decompressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/decompressor/v3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and TypeURL select the filter in http_filters; the library names are Envoy's.
const (
	Name       = "envoy.filters.http.decompressor"
	TypeURL    = "type.googleapis.com/envoy.extensions.filters.http.decompressor.v3.Decompressor"
	GzipName   = "envoy.compression.gzip.decompressor"
	BrotliName = "envoy.compression.brotli.decompressor"
	ZstdName   = "envoy.compression.zstd.decompressor"
	// defaultInflateRatio is gzip's max_inflate_ratio default.
	defaultInflateRatio = 100
)

// errInflateRatio is a body that inflates past max_inflate_ratio (a decompression bomb).
var errInflateRatio = errors.New("decompressor: body inflates past max_inflate_ratio")

// Register registers the filter and declares the decompression libraries it builds.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &decompressorv3.Decompressor{}, filter.Extension{
		New: func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
	})
	b.Declare(registry.Decompressor, GzipName, &gzipv3.Gzip{})
	b.Declare(registry.Decompressor, BrotliName, &brotliv3.Brotli{})
	b.Declare(registry.Decompressor, ZstdName, &zstdv3.Zstd{})
}

// Stats are one direction's stats, under
// http.<stat_prefix>.decompressor.<library name>.<gzip|brotli|zstd>.<request|response>.
type Stats struct {
	Decompressed           stats.Counter `stat:"decompressed"`
	NotDecompressed        stats.Counter `stat:"not_decompressed"`
	TotalUncompressedBytes stats.Counter `stat:"total_uncompressed_bytes"`
	TotalCompressedBytes   stats.Counter `stat:"total_compressed_bytes"`
}

// library is a compiled decompressor_library.
type library struct {
	name       string
	encoding   string // the content coding it undoes
	statPrefix string
	ratio      int64 // max_inflate_ratio; 0 for none
	chunk      int   // chunk_size: the most a decode hands on at once
	newReader  func(r io.Reader) (io.Reader, error)
}

// direction is a compiled common direction config.
type direction struct {
	enabledKey  string
	enabledDef  bool
	ignoreNoTfm bool
}

func directionFromProto(p *decompressorv3.Decompressor_CommonDirectionConfig) direction {
	d := direction{enabledDef: true, ignoreNoTfm: p.GetIgnoreNoTransformHeader()}
	if e := p.GetEnabled(); e != nil {
		d.enabledKey, d.enabledDef = e.GetRuntimeKey(), e.GetDefaultValue().GetValue()
	}
	return d
}

func (d direction) enabled(ctx *filter.Context) bool {
	def := uint64(0)
	if d.enabledDef {
		def = 1
	}
	return ctx.RuntimeValue(d.enabledKey, def) != 0
}

// Filter is one configured decompressor filter. Immutable; safe for concurrent use.
type Filter struct {
	ctx       *filter.Context
	lib       *library
	request   direction
	response  direction
	advertise bool
	reqStats  *Stats
	respStats *Stats
	releases  []func()
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	var pb decompressorv3.Decompressor
	if err := filter.Decode(cfg, TypeURL, Name+": typed_config", &pb); err != nil {
		return nil, err
	}
	lib, err := libraryFromProto(pb.GetDecompressorLibrary())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if ctx == nil {
		ctx = &filter.Context{}
	}
	f := &Filter{ctx: ctx, lib: lib, advertise: true,
		request:  directionFromProto(pb.GetRequestDirectionConfig().GetCommonConfig()),
		response: directionFromProto(pb.GetResponseDirectionConfig().GetCommonConfig())}
	if v := pb.GetRequestDirectionConfig().GetAdvertiseAcceptEncoding(); v != nil {
		f.advertise = v.GetValue()
	}
	prefix := ctx.StatPrefix + "decompressor." + lib.name + "." + lib.statPrefix + "."
	var release func()
	f.reqStats, release = filter.AcquireStats[Stats](ctx.Stats, prefix+"request.")
	f.releases = append(f.releases, release)
	f.respStats, release = filter.AcquireStats[Stats](ctx.Stats, prefix+"response.")
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

// libraryFromProto compiles decompressor_library.
// defaultChunk is Envoy's chunk_size default for every decompressor library.
const defaultChunk = 4096

// chunkSize is a library's chunk_size, Envoy's default when unset.
func chunkSize(v interface{ GetValue() uint32 }) int {
	if v == nil || v.GetValue() == 0 {
		return defaultChunk
	}
	return int(v.GetValue())
}

func libraryFromProto(tc *corev3.TypedExtensionConfig) (*library, error) {
	cfg := tc.GetTypedConfig()
	path := "decompressor_library.typed_config"
	switch u := cfg.GetTypeUrl(); u {
	case filter.TypeURL(&gzipv3.Gzip{}):
		var pb gzipv3.Gzip
		if err := filter.Decode(cfg, u, path, &pb); err != nil {
			return nil, err
		}
		ratio := int64(defaultInflateRatio)
		if pb.MaxInflateRatio != nil {
			ratio = int64(pb.GetMaxInflateRatio().GetValue())
		}
		return &library{name: tc.GetName(), encoding: "gzip", statPrefix: "gzip", ratio: ratio, chunk: chunkSize(pb.GetChunkSize()),
			newReader: func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }}, nil
	case filter.TypeURL(&brotliv3.Brotli{}):
		var pb brotliv3.Brotli
		if err := filter.Decode(cfg, u, path, &pb); err != nil {
			return nil, err
		}
		if pb.GetDisableRingBufferReallocation() {
			return nil, fmt.Errorf("%s.disable_ring_buffer_reallocation: true not implemented by Legate", path)
		}
		return &library{name: tc.GetName(), encoding: "br", statPrefix: "brotli", chunk: chunkSize(pb.GetChunkSize()),
			newReader: func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil }}, nil
	case filter.TypeURL(&zstdv3.Zstd{}):
		var pb zstdv3.Zstd
		if err := filter.Decode(cfg, u, path, &pb); err != nil {
			return nil, err
		}
		if len(pb.GetDictionaries()) > 0 {
			return nil, fmt.Errorf("%s.dictionaries: not implemented by Legate", path)
		}
		return &library{name: tc.GetName(), encoding: "zstd", statPrefix: "zstd", chunk: chunkSize(pb.GetChunkSize()),
			newReader: func(r io.Reader) (io.Reader, error) {
				return zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
			}}, nil
	default:
		return nil, fmt.Errorf("%s: type %q is not a decompressor library Legate implements (gzip, brotli, zstd)", path, u)
	}
}

// OnRequest advertises the library's encoding upstream when responses are decompressed, and
// decompresses a request body encoded with it.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	h := x.Request.Header
	if f.response.enabled(f.ctx) && f.advertise {
		if vs := h.Values("Accept-Encoding"); len(vs) > 0 {
			h.Set("Accept-Encoding", strings.Join(vs, ",")+","+f.lib.encoding)
		} else {
			h.Set("Accept-Encoding", f.lib.encoding)
		}
	}
	if f.start(h, f.request, f.reqStats) {
		x.RewriteRequestBody(f.rewriter(f.reqStats))
	}
	return nil
}

// OnResponse decompresses a response body encoded with the library's encoding.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	if x.ResponseLength == 0 || x.Request.Method == http.MethodHead {
		return // no body (Envoy's end_stream at the headers)
	}
	if f.start(h, f.response, f.respStats) {
		x.RewriteResponseBody(f.rewriter(f.respStats))
	}
}

// start decides whether a message is decompressed and, if so, takes the library's coding off
// its content-encoding (the first listed) and its content-length off.
func (f *Filter) start(h http.Header, d direction, st *Stats) bool {
	ce := h.Values("Content-Encoding")
	all := strings.TrimSpace(strings.Join(ce, ","))
	first, rest, more := strings.Cut(all, ",")
	if !d.enabled(f.ctx) || (!d.ignoreNoTfm && noTransform(h)) || !strings.EqualFold(strings.TrimSpace(first), f.lib.encoding) {
		st.NotDecompressed.Inc()
		return false
	}
	st.Decompressed.Inc()
	if rest = strings.TrimSpace(rest); more && rest != "" {
		h.Set("Content-Encoding", rest)
	} else {
		h.Del("Content-Encoding")
	}
	h.Del("Content-Length")
	return true
}

func noTransform(h http.Header) bool {
	for _, v := range h.Values("Cache-Control") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "no-transform") {
				return true
			}
		}
	}
	return false
}

func (f *Filter) rewriter(st *Stats) filter.BodyRewriter {
	lib := f.lib
	return func(src filter.Body) io.Reader { return &inflating{src: src, lib: lib, st: st} }
}

// inflating decompresses a body as it is read, counting the bytes in and out, and fails once
// the output exceeds max_inflate_ratio times the input read so far.
type inflating struct {
	src filter.Body
	lib *library
	st  *Stats
	dec io.Reader
	in  int64
	out int64
}

// Read implements io.Reader.
func (z *inflating) Read(p []byte) (int, error) {
	if z.dec == nil {
		d, err := z.lib.newReader(countingReader{z})
		if err != nil {
			return 0, err
		}
		z.dec = d
	}
	if c := z.lib.chunk; len(p) > c {
		p = p[:c] // Envoy's decoders fill an output buffer of chunk_size bytes at a time
	}
	n, err := z.dec.Read(p)
	z.out += int64(n)
	z.st.TotalUncompressedBytes.Add(uint64(n))
	if z.lib.ratio > 0 && z.out > z.lib.ratio*max(z.in, 1) {
		return 0, errInflateRatio
	}
	return n, err
}

// Close releases a zstd decoder's resources.
func (z *inflating) Close() error {
	if c, ok := z.dec.(interface{ Close() }); ok {
		c.Close()
	}
	return nil
}

// countingReader counts the compressed bytes the decoder reads.
type countingReader struct{ z *inflating }

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.z.src.Read(p)
	c.z.in += int64(n)
	c.z.st.TotalCompressedBytes.Add(uint64(n))
	return n, err
}
