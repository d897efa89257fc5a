//go:build race

package httpproxy

// tlsAllocs is TestProxyAllocs's count for a request over TLS under the race detector (measured:
// crypto/tls allocates more there).
const tlsAllocs = 4
