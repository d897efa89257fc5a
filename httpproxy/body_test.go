package httpproxy

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// TestBodies sends request bodies of several sizes and framings through the proxy to an
// upstream that echoes them back with or without a Content-Length.
func TestBodies(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		if r.URL.Query().Get("stream") != "" {
			// No Content-Length: the proxy sends the body chunked.
			for len(b) > 0 {
				n := min(len(b), 7000)
				w.Write(b[:n])
				w.(http.Flusher).Flush()
				b = b[n:]
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm: simpleHCM("web", ", retry_policy: {retry_on: 5xx, num_retries: 1}")})
	h1, h2 := e.client(), h2cClient(t)
	for _, size := range []int{0, 1, 4096, 100 << 10, 3 << 20} {
		body := bytes.Repeat([]byte("0123456789abcdefghij"), size/20+1)[:size]
		want := sha256.Sum256(body)
		for _, tc := range []struct {
			name    string
			c       *http.Client
			chunked bool
			stream  bool
		}{
			{"http1 length", h1, false, false},
			{"http1 chunked", h1, true, false},
			{"http1 streamed response", h1, false, true},
			{"h2c", h2, false, false},
			{"h2c streamed", h2, true, true},
		} {
			t.Run(tc.name+"/"+strconv.Itoa(size), func(t *testing.T) {
				var rd io.Reader = bytes.NewReader(body)
				if tc.chunked {
					rd = io.MultiReader(rd) // hides the length: sent chunked (HTTP/1) or unknown (HTTP/2)
				}
				url := "http://" + e.addr + "/echo"
				if tc.stream {
					url += "?stream=1"
				}
				req, err := http.NewRequest(http.MethodPost, url, rd)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := tc.c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("reading response: %v", err)
				}
				if resp.StatusCode != 200 || sha256.Sum256(got) != want {
					t.Errorf("got %d with %d bytes; want 200 echoing %d bytes", resp.StatusCode, len(got), size)
				}
			})
		}
	}
}
