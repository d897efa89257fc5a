package compressor

import (
	"fmt"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	zstdv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/compressor/v3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// The compression libraries (Envoy's envoy.compression.compressor extensions).
const (
	GzipName      = "envoy.compression.gzip.compressor"
	BrotliName    = "envoy.compression.brotli.compressor"
	ZstdName      = "envoy.compression.zstd.compressor"
	defaultChunk  = 4096 // Envoy's chunk_size default for every library
	zstdDefault   = 3    // ZSTD_CLEVEL_DEFAULT
	brotliQuality = 3    // Envoy's quality default
	brotliWindow  = 18   // Envoy's window_bits default
)

// encoder is one compressor's stream: Write compresses, Flush hands what was written on as a
// complete block (Envoy's Flush state), Close ends the stream (Finish), Reset starts another.
type encoder interface {
	io.WriteCloser
	Flush() error
	Reset(w io.Writer)
}

// library is a compiled compressor_library: the content coding it produces, the name and
// stat prefix its stats go under, and a pool of its encoders.
type library struct {
	name       string // compressor_library.name
	encoding   string // the content-encoding token (gzip, br, zstd)
	statPrefix string // the library's own stat prefix (gzip, brotli, zstd)
	chunk      int    // the most compressed bytes handed on at once (chunk_size)
	newEnc     func() (encoder, error)
	pool       sync.Pool // of encoder
}

// get returns an encoder writing into w.
func (l *library) get(w io.Writer) (encoder, error) {
	if e, ok := l.pool.Get().(encoder); ok {
		e.Reset(w)
		return e, nil
	}
	e, err := l.newEnc()
	if err != nil {
		return nil, err
	}
	e.Reset(w)
	return e, nil
}

// put returns an encoder for reuse.
func (l *library) put(e encoder) {
	e.Reset(io.Discard)
	l.pool.Put(e)
}

// libraryFromProto compiles a compressor_library; path names it in errors.
func libraryFromProto(tc *corev3.TypedExtensionConfig, path string) (*library, error) {
	if tc == nil {
		return nil, fmt.Errorf("%s: required", path)
	}
	cfg := tc.GetTypedConfig()
	switch u := cfg.GetTypeUrl(); u {
	case filter.TypeURL(&gzipv3.Gzip{}):
		var pb gzipv3.Gzip
		if err := filter.Decode(cfg, u, path+".typed_config", &pb); err != nil {
			return nil, err
		}
		return gzipLibrary(tc.GetName(), &pb, path)
	case filter.TypeURL(&brotliv3.Brotli{}):
		var pb brotliv3.Brotli
		if err := filter.Decode(cfg, u, path+".typed_config", &pb); err != nil {
			return nil, err
		}
		return brotliLibrary(tc.GetName(), &pb, path)
	case filter.TypeURL(&zstdv3.Zstd{}):
		var pb zstdv3.Zstd
		if err := filter.Decode(cfg, u, path+".typed_config", &pb); err != nil {
			return nil, err
		}
		return zstdLibrary(tc.GetName(), &pb, path)
	default:
		return nil, fmt.Errorf("%s.typed_config: type %q is not a compressor library Legate implements (gzip, brotli, zstd)", path, u)
	}
}

// chunkSize is a library's chunk_size, Envoy's default when unset.
func chunkSize(v interface{ GetValue() uint32 }, set bool) int {
	if !set {
		return defaultChunk
	}
	return int(v.GetValue())
}

func gzipLibrary(name string, pb *gzipv3.Gzip, path string) (*library, error) {
	level := gzip.DefaultCompression
	switch pb.GetCompressionLevel() {
	case gzipv3.Gzip_DEFAULT_COMPRESSION:
	default:
		level = int(pb.GetCompressionLevel()) // 1 to 9, as zlib's
	}
	switch pb.GetCompressionStrategy() {
	case gzipv3.Gzip_DEFAULT_STRATEGY:
	case gzipv3.Gzip_HUFFMAN_ONLY:
		level = gzip.HuffmanOnly
	default:
		return nil, fmt.Errorf("%s.typed_config.compression_strategy: %v not implemented by Legate (DEFAULT_STRATEGY and HUFFMAN_ONLY are)", path, pb.GetCompressionStrategy())
	}
	return &library{
		name: name, encoding: "gzip", statPrefix: "gzip", chunk: chunkSize(pb.GetChunkSize(), pb.ChunkSize != nil),
		newEnc: func() (encoder, error) { return gzip.NewWriterLevel(io.Discard, level) },
	}, nil
}

func brotliLibrary(name string, pb *brotliv3.Brotli, path string) (*library, error) {
	switch {
	case pb.GetEncoderMode() != brotliv3.Brotli_DEFAULT:
		return nil, fmt.Errorf("%s.typed_config.encoder_mode: %v not implemented by Legate", path, pb.GetEncoderMode())
	case pb.InputBlockBits != nil:
		return nil, fmt.Errorf("%s.typed_config.input_block_bits: not implemented by Legate", path)
	case pb.GetDisableLiteralContextModeling():
		return nil, fmt.Errorf("%s.typed_config.disable_literal_context_modeling: true not implemented by Legate", path)
	}
	o := brotli.WriterOptions{Quality: brotliQuality, LGWin: brotliWindow}
	if pb.Quality != nil {
		o.Quality = int(pb.GetQuality().GetValue())
	}
	if pb.WindowBits != nil {
		o.LGWin = int(pb.GetWindowBits().GetValue())
	}
	return &library{
		name: name, encoding: "br", statPrefix: "brotli", chunk: chunkSize(pb.GetChunkSize(), pb.ChunkSize != nil),
		newEnc: func() (encoder, error) { return brotli.NewWriterOptions(io.Discard, o), nil },
	}, nil
}

func zstdLibrary(name string, pb *zstdv3.Zstd, path string) (*library, error) {
	switch {
	case pb.GetStrategy() != zstdv3.Zstd_DEFAULT:
		return nil, fmt.Errorf("%s.typed_config.strategy: %v not implemented by Legate", path, pb.GetStrategy())
	case pb.Dictionary != nil:
		return nil, fmt.Errorf("%s.typed_config.dictionary: not implemented by Legate", path)
	}
	level := zstdDefault
	if pb.CompressionLevel != nil {
		level = int(pb.GetCompressionLevel().GetValue())
	}
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderCRC(pb.GetEnableChecksum()),
		zstd.WithEncoderConcurrency(1), // one stream, compressed on the goroutine reading it
	}
	return &library{
		name: name, encoding: "zstd", statPrefix: "zstd", chunk: chunkSize(pb.GetChunkSize(), pb.ChunkSize != nil),
		newEnc: func() (encoder, error) { return zstd.NewWriter(io.Discard, opts...) },
	}, nil
}
