// Package compressor is the envoy.filters.http.compressor HTTP filter (typed_config
// envoy.extensions.filters.http.compressor.v3.Compressor) with its compression libraries
// envoy.compression.gzip.compressor (github.com/klauspost/compress/gzip),
// envoy.compression.brotli.compressor (github.com/andybalholm/brotli) and
// envoy.compression.zstd.compressor (github.com/klauspost/compress/zstd).
//
// It compresses a response when the request's accept-encoding prefers the filter's encoding
// (q-values; "*" stands for the first compressor filter of the chain; q=0 refuses; when
// several compressor filters are chained they decide once, together, as Envoy's filter state
// does), the response has a body of at least min_content_length (default 30; a body of unknown
// length qualifies), a listed content type (Envoy's default list), no content-encoding, no
// cache-control no-transform, no ETag under disable_on_etag_header, and a status not in
// uncompressible_response_codes. A compressed response loses its content-length (chunked on
// HTTP/1.1), gets content-encoding and vary: accept-encoding, and a strong ETag is removed (or
// weakened under weaken_etag_on_compress). Vary is also added to a compressible response the
// client did not accept compressed. The body is compressed as it streams: each read of the
// upstream body is compressed and flushed (Envoy's per-chunk Flush), the end finishes the
// stream. With request_direction_config, a request body of a listed type and a content-length
// of at least min_content_length (or chunked) without content-encoding is compressed, its
// content-length removed and content-encoding set.
//
// Implemented: compressor_library (required), request_direction_config.common_config
// (enabled, min_content_length, content_type), response_direction_config (common_config,
// disable_on_etag_header, weaken_etag_on_compress, remove_accept_encoding_header,
// uncompressible_response_codes), and the deprecated content_length, content_type,
// disable_on_etag_header, remove_accept_encoding_header and runtime_enabled, used when
// response_direction_config is unset (as Envoy). Per route, CompressorPerRoute's disabled
// (response compression off) and overrides (response_direction_config.
// remove_accept_encoding_header, compressor_library).
// Refused ("not implemented by Legate"): choose_first true, content_type_matcher,
// status_header_enabled true.
//
// Libraries: gzip's compression_level and compression_strategy DEFAULT_STRATEGY and
// HUFFMAN_ONLY (FILTERED, RLE and FIXED are refused); memory_level and window_bits are
// checked against Envoy's ranges and size zlib's state, which Legate's deflate does not have (it
// always keeps a 32 KiB window; the output is a gzip stream any decoder reads). brotli's quality
// and window_bits (encoder_mode other than DEFAULT, input_block_bits and
// disable_literal_context_modeling are refused). zstd's compression_level and enable_checksum
// (strategy other than DEFAULT and dictionary are refused). Every library's chunk_size bounds
// the compressed bytes handed on at once.
//
// Stats, as Envoy names them: http.<stat_prefix>.compressor.<library name>.<gzip|brotli|zstd>.
// response.* (compressed, not_compressed, total_uncompressed_bytes, total_compressed_bytes,
// content_length_too_small, no_accept_header, header_identity, header_compressor_used,
// header_compressor_overshadowed, header_wildcard, header_not_valid, not_compressed_etag;
// without "response." when response_direction_config is unset) and ...request.* (compressed,
// not_compressed, total_uncompressed_bytes, total_compressed_bytes, content_length_too_small).
//
// Concurrency: a Filter is immutable; encoders come from a pool per library; what a stream's
// compressor filters share is kept in its filter.Exchange.
package compressor
