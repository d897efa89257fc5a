// Package alstest runs a real envoy.service.accesslog.v3.AccessLogService on 127.0.0.1 and an
// als.Manager for tests of the packages that stream access logs (the HTTP connection manager,
// the TCP proxy) and of the binary.
//
// Concurrency: a Server's gRPC streams run on goroutines of their own and call the receive
// function (or send on Msgs) from there; everything Start, Serve and RunManager start is
// stopped and awaited by the test's cleanup.
package alstest
