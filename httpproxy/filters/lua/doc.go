// Package lua is the envoy.filters.http.lua HTTP filter (typed_config
// envoy.extensions.filters.http.lua.v3.Lua) on github.com/yuin/gopher-lua (Lua 5.1, as
// Envoy's LuaJIT mostly is): scripts define envoy_on_request(handle) and
// envoy_on_response(handle), called with the request's and the response's headers.
//
// Configuration. Implemented: inline_code or default_source_code (inline or a file),
// source_codes (by name), stat_prefix, clear_route_cache unset or true (Legate routes a
// request after its filters, on the headers they left, which is what clearing does), and
// per-route LuaPerRoute: disabled, name (a source_codes entry; a name the filter lacks runs
// nothing, as Envoy) and source_code. A script that does not compile, or fails when its chunk
// runs, is refused at load with the Lua error. Refused with "not implemented by Legate":
// clear_route_cache false, LuaPerRoute.filter_context, DataSource environment_variable.
//
// The handle. headers(): get (several values joined with ","), getAtIndex (from 0),
// getNumValues, add, replace, remove and iteration with pairs (__pairs; pseudo-headers first,
// then headers by name); the request's :path, :method, :authority and :scheme read and set
// its fields, the response's :status reads the status and, replaced, changes the status the
// client gets (filter.Exchange.Status; a value that is not a code from 100 to 999 raises a
// Lua error). body([always_wrap]) and bodyChunks() read
// the body whole into memory (up to 1 MiB) and give a buffer with length(), getBytes(index,
// length) and setBytes(s); bodyChunks yields it as one chunk. In envoy_on_request the body is
// read with filter.Downstream.BufferBody (more than 1 MiB answers 413) and setBytes replaces
// what the upstream gets, with its new length (filter.Exchange.RewriteRequestBody). In
// envoy_on_response the script, a coroutine, yields in body() and is resumed by a
// filter.BodyRewriter once the response body is read (more than 1 MiB resets the response),
// with the headers held (filter.Exchange.HoldResponseHeaders) so that it may still change
// them, as Envoy; setBytes replaces what the client gets, sent with its length. After body()
// the response script may not reach the stream's info (streamInfo, metadata, connection):
// that raises a Lua error. trailers() gives the stream's trailers once its body has ended
// as a header map object (get, getAtIndex, getNumValues, add, replace, remove, pairs; no
// pseudo-headers), changed in place so that the peer gets what the script left, or nil when
// the stream has none (as in Envoy, none can then be added). In envoy_on_response it yields
// as body() does and gives the response's trailers (gRPC's grpc-status from an HTTP/2
// upstream; filter.Body.Trailers), which the client gets. In envoy_on_request it reads the
// body whole as body() does and gives the trailers the upstream request carries
// (filter.Exchange.BufferedTrailers): an HTTP/2 client's; an HTTP/1 request's body read
// whole goes with its length and without trailers, so trailers() is nil there.
// respond(headers, body) answers the request (request flow only) and ends the script. httpCall(cluster, headers, body, timeout_ms[,
// asynchronous or {asynchronous = bool}]) goes through the data plane's pools
// (filter.Call); a failure returns a 503 "upstream failure" as Envoy's. logTrace, logDebug,
// logInfo, logWarn, logErr, logCritical log "script log: <msg>" under the lua component.
// streamInfo(): protocol, downstreamLocalAddress, downstreamDirectRemoteAddress,
// downstreamRemoteAddress, requestedServerName, routeName, downstreamSslConnection, and
// dynamicMetadata() with get(ns), set(ns, key, value) and pairs. metadata(): the route's
// filter_metadata under the filter's name (then envoy.filters.http.lua) with get and pairs.
// connection():ssl(): nil for plain text, else peerCertificatePresented,
// peerCertificateValidated, tlsVersion, ciphersuiteString, sha256PeerCertificateDigest,
// uriSanPeerCertificate, dnsSansPeerCertificate. base64Escape, timestamp (milliseconds) and
// timestampString ("milliseconds" or "microseconds").
//
// Not implemented, raising a Lua error "<object>:<method>() is not implemented by Legate":
// any other method of an API object (clearRouteCache, importPublicKey,
// verifySignature, setUpstreamOverrideHost, virtualHost, filterContext, the header map's
// setHttp1ReasonPhrase, ...). Changing response pseudo-headers other than :status, or
// removing a pseudo-header, also raises an error.
//
// Errors. As Envoy's scriptError, a Lua error in a script is counted in
// http.<stat_prefix>.lua[.<lua stat_prefix>].errors and logged at error level, and the
// stream goes on with what the script did before failing; it never crashes the proxy (a Go
// panic inside the API is a Lua error too).
//
// Concurrency. Each compiled script keeps a pool of Lua states (sync.Pool); a state serves
// one call at a time, so globals a script sets persist in some states and not in others (in
// Envoy they are per worker thread). A call runs on the stream's goroutine: httpCall and
// the request's body() block it, where Envoy suspends a coroutine; a response script resumed
// after body() runs on the goroutine that forwards the response body, with its state still
// its own. An asynchronous httpCall runs on its own goroutine, which ends with the call or
// when the filter is closed. os.exit raises a Lua error rather than ending the proxy.
package lua
