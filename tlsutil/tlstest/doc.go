// Package tlstest makes certificate authorities, certificates and CRLs for
// tests, so no key material is ever checked in. Everything it returns is
// immutable and safe to share between goroutines; helpers fail the test
// through testing.TB on error. RecordCounter, which counts the TLS records a
// peer sends, is the exception: it belongs to the goroutine reading it.
package tlstest
