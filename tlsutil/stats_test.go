package tlsutil

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// sslStats returns the non-zero counters whose names contain ".ssl.".
func sslStats(t *testing.T, store *stats.Store) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	store.Each(stats.KindSet(stats.KindCounter), func(st *stats.Stat) bool {
		if strings.Contains(st.Name(), ".ssl.") && st.Value() > 0 {
			got[st.Name()] += st.Value()
		}
		return true
	})
	return got
}

// acceptTLS serves ServerContext.Accept on 127.0.0.1: each connection's
// handshake result goes to the returned channel; a good connection gets
// "ok" and is held until the peer closes it.
func acceptTLS(t *testing.T, sc *ServerContext) (string, <-chan error) {
	t.Helper()
	done := make(chan error, 16)
	addr := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		tc, _, _, err := sc.Accept(c, time.Now().Add(10*time.Second), false)
		done <- err
		if err == nil {
			io.WriteString(tc, "ok")
			io.Copy(io.Discard, tc)
		}
	})
	return addr, done
}

// clientHandshake dials addr with cc, counting in cc's stats, and reads the
// server's "ok" (and with it a TLS 1.3 session ticket) when the handshake
// succeeds. It returns the client's state and error.
func clientHandshake(t *testing.T, addr string, cc *ClientContext, server <-chan error) (tls.ConnectionState, error, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := tls.Client(conn, cc.Config())
	cs, cerr := cc.Stats().Handshake(ctx, tc)
	if cerr == nil {
		tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 2)
		io.ReadFull(tc, buf)
	}
	conn.Close()
	select {
	case serr := <-server:
		return cs, cerr, serr
	case <-ctx.Done():
		t.Fatal("the server did not finish the handshake")
	}
	return cs, cerr, nil
}

// TestHandshakeStats runs real handshakes between a ServerContext
// (listener.127.0.0.1_10000.ssl.*) and a ClientContext (cluster.web.ssl.*)
// and checks every non-zero ssl counter of both scopes by name.
func TestHandshakeStats(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, tlstest.Options{})
	server := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	client := ca.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}})
	otherCA := tlstest.NewCA(t, tlstest.Options{CommonName: "Other CA"})
	stranger := otherCA.Issue(t, tlstest.Options{CommonName: "stranger"})
	caFile := writeFile(t, dir, "ca.pem", ca.CertPEM)
	cert := func(c *tlstest.Cert, name string) string {
		return fmt.Sprintf("{certificate_chain: {filename: %s}, private_key: {filename: %s}}",
			writeFile(t, dir, name+".pem", c.CertPEM), writeFile(t, dir, name+".key", c.KeyPEM))
	}
	tls12 := "tls_params: {tls_maximum_protocol_version: TLSv1_2, cipher_suites: [ECDHE-ECDSA-AES128-GCM-SHA256], ecdh_curves: [P-256]}"
	const (
		ls = "listener.127.0.0.1_10000.ssl."
		cl = "cluster.web.ssl."
	)
	tests := []struct {
		name           string
		server, client string // context YAML
		connections    int
		// want returns the expected counters given the client's state of
		// the last connection (TLS 1.3 picks its cipher by hardware).
		want          func(cs tls.ConnectionState) map[string]uint64
		wantClientErr error
		serverRejects bool
	}{
		{
			name:        "one good TLS 1.2 handshake with client certificates",
			server:      fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {%s, tls_certificates: [%s], validation_context: {trusted_ca: {filename: %s}}}", tls12, cert(server, "server"), caFile),
			client:      fmt.Sprintf("common_tls_context: {%s, tls_certificates: [%s], validation_context: {trusted_ca: {filename: %s}}}", tls12, cert(client, "client"), caFile),
			connections: 1,
			want: func(tls.ConnectionState) map[string]uint64 {
				return map[string]uint64{
					ls + "handshake": 1, ls + "ciphers.ECDHE-ECDSA-AES128-GCM-SHA256": 1, ls + "versions.TLSv1.2": 1, ls + "curves.P-256": 1,
					cl + "handshake": 1, cl + "ciphers.ECDHE-ECDSA-AES128-GCM-SHA256": 1, cl + "versions.TLSv1.2": 1, cl + "curves.P-256": 1,
				}
			},
		},
		{
			name:        "TLS 1.3 session resumed, server without client certificates",
			server:      fmt.Sprintf("common_tls_context: {tls_certificates: [%s], tls_params: {ecdh_curves: [X25519]}}", cert(server, "server")),
			client:      "common_tls_context: {tls_params: {tls_maximum_protocol_version: TLSv1_3}}\nmax_session_keys: 4",
			connections: 2,
			want: func(cs tls.ConnectionState) map[string]uint64 {
				cipher := "ciphers." + tls.CipherSuiteName(cs.CipherSuite)
				return map[string]uint64{
					ls + "handshake": 2, ls + "session_reused": 1, ls + cipher: 2, ls + "versions.TLSv1.3": 2, ls + "curves.X25519": 2, ls + "no_certificate": 2,
					cl + "handshake": 2, cl + "session_reused": 1, cl + cipher: 2, cl + "versions.TLSv1.3": 2, cl + "curves.X25519": 2,
				}
			},
		},
		{
			name:          "missing client certificate",
			server:        fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {%s, tls_certificates: [%s], validation_context: {trusted_ca: {filename: %s}}}", tls12, cert(server, "server"), caFile),
			client:        "common_tls_context: {" + tls12 + "}",
			connections:   1,
			serverRejects: true,
			want: func(tls.ConnectionState) map[string]uint64 {
				return map[string]uint64{ls + "fail_verify_no_cert": 1, cl + "connection_error": 1}
			},
			wantClientErr: errAny,
		},
		{
			name:          "client certificate from another CA",
			server:        fmt.Sprintf("common_tls_context: {%s, tls_certificates: [%s], validation_context: {trusted_ca: {filename: %s}}}", tls12, cert(server, "server"), caFile),
			client:        fmt.Sprintf("common_tls_context: {%s, tls_certificates: [%s]}", tls12, cert(stranger, "stranger")),
			connections:   1,
			serverRejects: true,
			want: func(tls.ConnectionState) map[string]uint64 {
				return map[string]uint64{ls + "fail_verify_error": 1, cl + "connection_error": 1}
			},
			wantClientErr: errAny,
		},
		{
			name:          "server SAN does not match",
			server:        fmt.Sprintf("common_tls_context: {%s, tls_certificates: [%s]}", tls12, cert(server, "server")),
			client:        fmt.Sprintf("common_tls_context: {%s, validation_context: {trusted_ca: {filename: %s}, match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: other.example.com}}]}}", tls12, caFile),
			connections:   1,
			serverRejects: true,
			want: func(tls.ConnectionState) map[string]uint64 {
				return map[string]uint64{ls + "connection_error": 1, cl + "fail_verify_san": 1}
			},
			wantClientErr: ErrVerifySAN,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := stats.New(stats.Config{})
			if err != nil {
				t.Fatal(err)
			}
			scopes := NewStatsScopes(store)
			sc := newServer(t, tt.server, Deps{Stats: scopes, StatPrefix: "listener.127.0.0.1_10000."})
			cc := newClient(t, tt.client, Deps{Stats: scopes, StatPrefix: "cluster.web."})
			addr, done := acceptTLS(t, sc)
			var cs tls.ConnectionState
			for i := range tt.connections {
				var cerr, serr error
				cs, cerr, serr = clientHandshake(t, addr, cc, done)
				if (serr != nil) != tt.serverRejects {
					t.Fatalf("connection %d: server handshake error = %v; want error %v", i, serr, tt.serverRejects)
				}
				switch {
				case tt.wantClientErr == errAny && cerr == nil,
					tt.wantClientErr == nil && cerr != nil,
					tt.wantClientErr != nil && tt.wantClientErr != errAny && !errors.Is(cerr, tt.wantClientErr):
					t.Fatalf("connection %d: client handshake error = %v; want %v", i, cerr, tt.wantClientErr)
				}
			}
			if diff := cmp.Diff(tt.want(cs), sslStats(t, store)); diff != "" {
				t.Errorf("ssl stats (-want +got):\n%s", diff)
			}
		})
	}
}

// errAny stands for "some error" in TestHandshakeStats.
var errAny = errors.New("any error")

// TestStatsScopesShare checks that contexts of one scope share their
// counters and that the stats leave the store with the last context.
func TestStatsScopesShare(t *testing.T) {
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	scopes := NewStatsScopes(store)
	a := scopes.acquire("cluster.web.")
	b := scopes.acquire("cluster.web.")
	if a != b {
		t.Fatalf("acquire twice = %p, %p; want the same Stats", a, b)
	}
	a.Succeeded(&tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256, CurveID: tls.X25519MLKEM768})
	want := map[string]uint64{"cluster.web.ssl.handshake": 1, "cluster.web.ssl.ciphers.TLS_AES_128_GCM_SHA256": 1,
		"cluster.web.ssl.versions.TLSv1.3": 1, "cluster.web.ssl.curves.X25519MLKEM768": 1, "cluster.web.ssl.no_certificate": 1}
	if diff := cmp.Diff(want, sslStats(t, store)); diff != "" {
		t.Errorf("ssl stats (-want +got):\n%s", diff)
	}
	scopes.release("cluster.web.", a)
	if got := len(sslStats(t, store)); got != len(want) {
		t.Errorf("after one release: %d stats; want %d", got, len(want))
	}
	scopes.release("cluster.web.", b)
	if got := sslStats(t, store); len(got) != 0 {
		t.Errorf("after the last release: %v; want none", got)
	}
	var none *Stats
	none.Succeeded(&tls.ConnectionState{})
	none.Failed(errors.New("x"))
}

func TestNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{CipherName(tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), "ECDHE-RSA-AES128-GCM-SHA256"},
		{CipherName(tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256), "ECDHE-ECDSA-AES128-SHA256"},
		{CipherName(tls.TLS_CHACHA20_POLY1305_SHA256), "TLS_CHACHA20_POLY1305_SHA256"},
		{CipherName(0), ""},
		{VersionName(tls.VersionTLS11), "TLSv1.1"},
		{VersionName(0x0305), ""},
		{CurveName(tls.CurveP521), "P-521"},
		{CurveName(0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q; want %q", tt.got, tt.want)
			}
		})
	}
}
