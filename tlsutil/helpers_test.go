package tlsutil

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

const upstreamPath = "static_resources.clusters[0].transport_socket.typed_config"
const downstreamPath = "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config"

func decodeYAML(t testing.TB, text string, m proto.Message) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatalf("YAMLToJSON: %v\n%s", err, text)
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		t.Fatalf("protojson.Unmarshal: %v\n%s", err, js)
	}
}

func upstreamConfig(t testing.TB, text string) (UpstreamConfig, error) {
	t.Helper()
	var pb tlsv3.UpstreamTlsContext
	decodeYAML(t, text, &pb)
	return UpstreamFromProto(upstreamPath, &pb)
}

func downstreamConfig(t testing.TB, text string) (DownstreamConfig, error) {
	t.Helper()
	var pb tlsv3.DownstreamTlsContext
	decodeYAML(t, text, &pb)
	return DownstreamFromProto(downstreamPath, &pb)
}

// newClient converts text and builds a client context; both must succeed.
func newClient(t testing.TB, text string, deps Deps) *ClientContext {
	t.Helper()
	cfg, err := upstreamConfig(t, text)
	if err != nil {
		t.Fatalf("UpstreamFromProto: %v", err)
	}
	c, err := NewClientContext(cfg, deps)
	if err != nil {
		t.Fatalf("NewClientContext: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func newServer(t testing.TB, text string, deps Deps) *ServerContext {
	t.Helper()
	cfg, err := downstreamConfig(t, text)
	if err != nil {
		t.Fatalf("DownstreamFromProto: %v", err)
	}
	s, err := NewServerContext(cfg, deps)
	if err != nil {
		t.Fatalf("NewServerContext: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// writeFile writes data into dir and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// result is what one handshake over 127.0.0.1 showed on each side.
type result struct {
	client     tls.ConnectionState
	clientErr  error
	serverErr  error
	serverName string // SNI the server saw
	server     tls.ConnectionState
}

// handshake runs one TLS handshake between server and client over a real
// TCP connection on 127.0.0.1 and reports both sides.
func handshake(t testing.TB, server, client *tls.Config) result {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := server.Clone()
	inner := server.GetConfigForClient
	sni := make(chan string, 1)
	srv.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni <- h.ServerName
		if inner != nil {
			return inner(h)
		}
		return nil, nil
	}
	type serverSide struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan serverSide, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- serverSide{err: err}
			return
		}
		defer conn.Close()
		tc := tls.Server(conn, srv)
		err = tc.HandshakeContext(ctx)
		if err == nil {
			// Tell the client the server side accepted too (TLS 1.3
			// clients finish before the server checks their certificate).
			_, err = tc.Write([]byte("ok"))
		}
		done <- serverSide{state: tc.ConnectionState(), err: err}
	}()
	var r result
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(conn, client)
	r.clientErr = tc.HandshakeContext(ctx)
	r.client = tc.ConnectionState()
	if r.clientErr == nil {
		buf := make([]byte, 2)
		tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := tc.Read(buf); err != nil {
			r.clientErr = err
		}
	}
	conn.Close()
	select {
	case s := <-done:
		r.serverErr, r.server = s.err, s.state
	case <-ctx.Done():
		t.Fatal("server side of the handshake did not finish")
	}
	select {
	case r.serverName = <-sni:
	default:
	}
	return r
}

// goServer is a plain Go TLS server configuration presenting cert.
func goServer(t testing.TB, certPEM, keyPEM []byte, nextProtos ...string) *tls.Config {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: nextProtos, MaxVersion: tls.VersionTLS13}
}
