package httpservice

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

func service(uri, cluster string, timeout time.Duration, headers ...string) *corev3.HttpService {
	hs := &corev3.HttpService{HttpUri: &corev3.HttpUri{Uri: uri, HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster}}}
	if timeout != 0 {
		hs.HttpUri.Timeout = durationpb.New(timeout)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		hs.RequestHeadersToAdd = append(hs.RequestHeadersToAdd, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: headers[i], Value: headers[i+1]}})
	}
	return hs
}

// TestPost sends through a real net/http server reached by the cluster's dialer: the request
// goes to the URI's path with its host, the content type and the configured headers.
func TestPost(t *testing.T) {
	type seen struct{ path, host, ctype, key, body string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, r.Host, r.Header.Get("Content-Type"), r.Header.Get("X-Key"), string(b)}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	dial := func(ctx context.Context, cluster string) (net.Conn, error) {
		if cluster != "collector" {
			t.Errorf("dialled %q; want collector", cluster)
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}
	c, err := New("hs", service("https://otel.example:4318/v1/traces", "collector", time.Second, "x-key", "k1"), nil, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status, err := c.Post(context.Background(), "application/x-protobuf", []byte("payload"))
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("Post = %d, %v; want 202", status, err)
	}
	if s := <-got; s != (seen{"/v1/traces", "otel.example:4318", "application/x-protobuf", "k1", "payload"}) {
		t.Errorf("server saw %+v", s)
	}
}

// TestNewErrors checks that a bad HttpService is refused with its field path.
func TestNewErrors(t *testing.T) {
	exists := func(c string) bool { return c == "ok" }
	for _, tc := range []struct {
		hs   *corev3.HttpService
		want string
	}{
		{&corev3.HttpService{}, "hs.http_uri: required"},
		{service("http://x/p", "", 0), "hs.http_uri.cluster: required"},
		{service("http://x/p", "nope", 0), `hs.http_uri.cluster = "nope": unknown cluster`},
		{service("/p", "ok", 0), `hs.http_uri.uri = "/p": must be an absolute http or https URI`},
		{service("http://x/p", "ok", -time.Second), "hs.http_uri.timeout: must be a positive duration"},
		{service("http://x/p", "ok", 0, ":path", "v"), `hs.request_headers_to_add[0].header.key = ":path": must be a header name`},
		{&corev3.HttpService{HttpUri: &corev3.HttpUri{Uri: "http://x/p", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "ok"}}, Formatters: []*corev3.TypedExtensionConfig{{Name: "f"}}}, "hs.formatters: not implemented by Legate"},
	} {
		if _, err := New("hs", tc.hs, exists, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v; want %q", err, tc.want)
		}
	}
}
