// Package decompressor is the envoy.filters.http.decompressor HTTP filter (typed_config
// envoy.extensions.filters.http.decompressor.v3.Decompressor) with the decompression
// libraries envoy.compression.gzip.decompressor, envoy.compression.brotli.decompressor and
// envoy.compression.zstd.decompressor (github.com/klauspost/compress, github.com/andybalholm/
// brotli).
//
// A request or response whose content-encoding lists the library's coding first (gzip, br,
// zstd; case-insensitive) and has no cache-control no-transform (unless
// ignore_no_transform_header) is decompressed as it streams: the coding leaves
// content-encoding (the header goes when it was the only one), content-length goes (chunked on
// HTTP/1.1). While response decompression is enabled, the coding is appended to the request's
// accept-encoding (advertise_accept_encoding, default true). A body that inflates to more than
// max_inflate_ratio (gzip, default 100) times the compressed bytes read so far, or that does
// not decode, is cut: a request fails as a malformed body (400), a response is reset.
//
// Implemented: decompressor_library (required), request_direction_config (common_config's
// enabled and ignore_no_transform_header, advertise_accept_encoding),
// response_direction_config.common_config. Libraries: gzip's max_inflate_ratio; every
// library's chunk_size (default 4096, as Envoy's), the most one decode hands on at once:
// Envoy's output buffer. gzip's window_bits is checked against
// Envoy's range and changes nothing: it sizes zlib's window, and Legate's decoder reads
// streams of any window. Refused ("not implemented by Legate"): brotli's
// disable_ring_buffer_reallocation true, zstd's dictionaries.
//
// Not done: the x-envoy-decompressor-<name>-compressed-bytes / -uncompressed-bytes request
// trailers Envoy adds, and the libraries' own error stats.
//
// Stats, as Envoy names them: http.<stat_prefix>.decompressor.<library name>.
// <gzip|brotli|zstd>.<request|response>.decompressed, not_decompressed,
// total_compressed_bytes, total_uncompressed_bytes.
//
// Concurrency: a Filter is immutable; each body gets its own decoder.
package decompressor
