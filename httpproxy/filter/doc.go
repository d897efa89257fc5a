// Package filter is the contract between the HTTP connection manager (package httpproxy) and
// its HTTP filters other than the router (envoy.filters.http.*): a Filter sees each request's
// headers before routing and may answer it locally, and sees the response headers before they
// are sent. A filter that also implements StreamFilter gets a Stream per request that is fed
// the bodies, trailers, final response headers and the stream's end. Filters are found by
// name or typed_config type URL in a Registry, which FromRegistry makes from the extension
// registry (internal/registry) and its HTTPFilters entries.
//
// The router also runs some filters upstream (upstream_http_filters): once per attempt, with
// Exchange.Upstream set and the attempt's own copy of the request.
//
// Concurrency: a Filter is built once per connection manager configuration by its Factory and
// shared by every stream, so its methods must be safe for concurrent use; per-stream state
// lives in the Exchange and in a Stream, which belong to one stream. A Registry is filled
// while the server is assembled and only read afterwards.
package filter
