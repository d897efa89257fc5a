// Package http1 is Legate's HTTP/1.1 message framing, shared by the downstream codec
// (httpproxy, which reads requests and writes responses) and the upstream one (pool, which
// writes requests and reads responses): the character tables, the request-line and
// status-line parsers, header-line splitting, the interpretation of Content-Length and
// Transfer-Encoding, the chunked decoder and the chunk encoding helpers. Connection handling
// (buffers, deadlines, reuse) stays with its callers; this package does no I/O of its own
// beyond the Source a body is read from.
//
// # Where a message ends (RFC 9112 §6.3)
//
// These are the rules both sides apply; Fields.Request and Fields.Response state them in code.
//
//  1. A response to HEAD, and a 1xx, 204 or 304 response, has no body whatever its fields
//     say; its head ends it. A 101 response hands the connection to another protocol, so the
//     connection is not reused for HTTP/1.
//  2. A response whose Transfer-Encoding lists chunked last is chunked; with a Content-Length
//     too, chunked wins and the connection is closed after it. A response with any other
//     Transfer-Encoding is read until the connection closes.
//  3. A request with Transfer-Encoding is chunked only when the field is exactly "chunked",
//     once; any other coding is refused (501, as Envoy). A request with both
//     Transfer-Encoding and Content-Length is refused (400): RFC 9112 §6.1 calls it a
//     smuggling attempt, and Envoy refuses it unless allow_chunked_length (ParseRequestHead's
//     chunkedLength), which reads it as chunked.
//     An HTTP/1.0 request with Transfer-Encoding is refused (400); an HTTP/1.0 response with
//     it is framed as if the field were absent, and its connection closed (RFC 9112 §6.1
//     calls both faulty framing).
//  4. Otherwise a valid Content-Length gives the length. Several Content-Length fields must
//     agree; a value that is not all digits is malformed (no sign, no list).
//  5. Otherwise a request has no body, and a response is read until the connection closes
//     (and the connection is not reused).
//
// A chunked body ends after its last (zero-size) chunk and the trailer section's empty line.
// Every line of chunked framing must end in CRLF; a bare LF or CR is malformed. Request heads
// are held to the same rule; response heads accept a bare LF line end (RFC 9112 §2.2 lets a
// recipient do so, and net/http does), since they come from the hosts Legate is configured
// to trust.
//
// A connection carries another message after this one only when the message ended exactly
// at its boundary, and the head allowed it: HTTP/1.1 unless "Connection: close", HTTP/1.0
// only with "Connection: keep-alive" (RFC 9112 §9.3).
//
// # Where Legate is stricter than net/http
//
// TestDifferentialNetHTTP and FuzzFraming hold this package to net/http's parser on input
// both accept. Legate refuses on purpose: bare LF line ends in request heads and chunked
// framing; obsolete line folding; a request with both Transfer-Encoding and Content-Length,
// or with Transfer-Encoding in HTTP/1.0; versions other than HTTP/1.0 and 1.1; status codes
// below 100; 16-digit chunk sizes; a Host or absolute-form authority that is not host[:port]
// (userinfo included); "http://h?q" targets; control characters in chunk extensions. On
// input both accept, Legate closes the connection after a response with both chunked and
// Content-Length and after a 101, and skips empty lines before a request line (RFC 9112
// §2.2), which net/http's ReadRequest refuses.
//
// Everything here is safe for concurrent use except Body and Fields, which belong to the
// goroutine reading one message. Nothing allocates on the request path.
package http1
