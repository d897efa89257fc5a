// Package nettest serves test connections on 127.0.0.1 listeners for the packages that
// need a real peer (upstreams, proxies under test, the binary's backends).
//
// Concurrency: Serve accepts on a goroutine of its own and runs each connection's handler on
// another; the test's cleanup closes the listener and waits for all of them.
package nettest
