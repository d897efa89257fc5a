// Package httpinspector is Envoy's envoy.filters.listener.http_inspector listener filter
// (extensions.filters.listener.http_inspector.v3.HttpInspector, which has no fields): it reads
// the start of a plain-text connection and, when it is HTTP, sets the connection's
// application protocol to "h2c" (the HTTP/2 connection preface), "http/1.1" or "http/1.0"
// (the version of the request line), for filter_chain_match.application_protocols. A
// connection the TLS inspector found to be TLS is left alone, as in Envoy.
//
// A request line is a method token, a request target and the version, as llhttp reads it;
// Legate accepts any method token where llhttp knows a fixed list. The inspector gives up
// (http_not_found) when the first line is not HTTP or is not complete within 8 KiB.
//
// Stats, as Envoy's, rooted at http_inspector.: read_error (the connection ended before the
// inspector decided), http10_found, http11_found, http2_found, http_not_found.
package httpinspector
