// Package hellotest makes real TLS ClientHellos for the tests of the TLS inspector and of the
// filter chain selection that reads them.
package hellotest

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// Bytes returns the first flight of a crypto/tls client offering sni and alpn: the one TLS
// record that carries its ClientHello.
func Bytes(t testing.TB, sni string, alpn ...string) []byte {
	t.Helper()
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tls.Client(client, &tls.Config{ServerName: sni, NextProtos: alpn, InsecureSkipVerify: true}).Handshake()
	}()
	defer func() {
		server.Close()
		client.Close()
		<-done
	}()
	// Real clock: a pipe deadline, which bounds a client that never writes.
	server.SetReadDeadline(time.Now().Add(10 * time.Second))
	header := make([]byte, 5)
	if _, err := io.ReadFull(server, header); err != nil {
		t.Fatalf("reading the client hello's record header: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint16(header[3:5]))
	if _, err := io.ReadFull(server, body); err != nil {
		t.Fatalf("reading the client hello: %v", err)
	}
	return append(header, body...)
}
