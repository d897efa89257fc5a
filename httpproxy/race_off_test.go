//go:build !race

package httpproxy

// tlsAllocs is TestProxyAllocs's count for a request over TLS: crypto/tls's reader in the proxy
// and in the client.
const tlsAllocs = 2
