package httpproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// reflectUpstream answers each request with what it saw of it: the headers the reuse test
// sets (X-Seen-*), the names of its X-Only-* headers, a response header of the request's own
// (X-Reply-<id>) and the request body as the response body; X-Empty asks for a 204 instead,
// whose head is all there is to encode.
func reflectUpstream(t testing.TB) string {
	up := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var only []string
		for k := range r.Header {
			if strings.HasPrefix(k, "X-Only-") {
				only = append(only, k)
			}
		}
		slices.Sort(only)
		id := r.Header.Get("X-Id")
		h := w.Header()
		h.Set("X-Seen-Id", id)
		h.Set("X-Seen-Only", strings.Join(only, ","))
		h.Set("X-Seen-Multi", strings.Join(r.Header.Values("X-Multi"), ","))
		h.Set("X-Seen-Cookie", r.Header.Get("Cookie"))
		h.Set("X-Seen-Request-Id", r.Header.Get("X-Request-Id"))
		h.Set("X-Seen-Path", r.URL.Path)
		h.Set("X-Reply-"+id, "r"+id)
		if r.Header.Get("X-Empty") != "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Write(body)
	}))
	return up.Listener.Addr().String()
}

// TestH2StreamReuseKeepsRequestsApart sends many concurrent streams on one HTTP/2 connection,
// more than the connection keeps finished streams for (h2FreeStreams), each with headers,
// cookies and a body of its own, to an HTTP/1.1 and an HTTP/2 upstream. Streams, their header
// maps, value arrays and output buffers are reused from request to request on the connection
// and the connection manager's streams are pooled: a stream reused while its handler still
// ran, or a map, value or arena string kept from the request before, shows here as another
// request's value, an extra X-Only-* or X-Reply-* header, or a wrong body (and -race reports
// the overlap).
func TestH2StreamReuseKeepsRequestsApart(t *testing.T) {
	up := reflectUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("h1", "", up), staticCluster("h2", h2ClusterOptions, up)},
		hcm:      twoRouteHCM("/h1", "h1", "h2", "always_set_request_id_in_response: true"),
	})
	cc, _ := h2cConn(t, e.addr)
	defer cc.Close()
	const workers, perWorker = 3 * h2FreeStreams, 12
	concurrently(t, workers, perWorker, func(w, i int) error {
		return reuseRoundTrip(cc, e.addr, w*perWorker+i)
	})
}

// reuseRoundTrip sends request n (its headers, cookies and body made from n) and checks the
// answer reflectUpstream gives.
func reuseRoundTrip(cc *http2.ClientConn, addr string, n int) error {
	id := fmt.Sprint(n)
	path := fmt.Sprintf("/h2/%d", n)
	if n%2 == 0 {
		path = fmt.Sprintf("/h1/%d", n)
	}
	method, body := http.MethodGet, []byte(nil)
	if n%3 != 0 {
		// Up to 40 KB: some bodies span DATA frames and wait for window.
		method = http.MethodPost
		body = bytes.Repeat([]byte(id+"-"), 1+n*97%(40<<10)/(len(id)+1))
	}
	empty := n%5 == 0
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body == nil {
		req.Body = nil
	}
	req.Header.Set("X-Id", id)
	req.Header.Set("X-Only-"+id, "yes")
	req.Header.Add("X-Multi", "a"+id)
	req.Header.Add("X-Multi", "b"+id)
	req.Header.Add("Cookie", "c="+id)
	req.Header.Add("Cookie", "d="+id)
	if empty {
		req.Header.Set("X-Empty", "1")
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("request %d: %v", n, err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("request %d: reading the body: %v", n, err)
	}
	h := resp.Header
	var replies []string
	for k := range h {
		if strings.HasPrefix(k, "X-Reply-") {
			replies = append(replies, k+"="+h.Get(k))
		}
	}
	wantStatus, wantBody := http.StatusOK, body
	if empty {
		wantStatus, wantBody = http.StatusNoContent, nil
	}
	switch {
	case resp.StatusCode != wantStatus:
		return fmt.Errorf("request %d: status %d (%q); want %d", n, resp.StatusCode, got, wantStatus)
	case h.Get("X-Seen-Id") != id:
		return fmt.Errorf("request %d: upstream saw x-id %q", n, h.Get("X-Seen-Id"))
	case h.Get("X-Seen-Only") != "X-Only-"+id:
		return fmt.Errorf("request %d: upstream saw x-only headers %q", n, h.Get("X-Seen-Only"))
	case h.Get("X-Seen-Multi") != "a"+id+",b"+id:
		return fmt.Errorf("request %d: upstream saw x-multi %q", n, h.Get("X-Seen-Multi"))
	case h.Get("X-Seen-Cookie") != "c="+id+"; d="+id:
		return fmt.Errorf("request %d: upstream saw cookie %q", n, h.Get("X-Seen-Cookie"))
	case h.Get("X-Seen-Path") != path:
		return fmt.Errorf("request %d: upstream saw path %q; want %q", n, h.Get("X-Seen-Path"), path)
	case h.Get("X-Request-Id") == "" || h.Get("X-Request-Id") != h.Get("X-Seen-Request-Id"):
		return fmt.Errorf("request %d: x-request-id %q; upstream saw %q", n, h.Get("X-Request-Id"), h.Get("X-Seen-Request-Id"))
	case len(replies) != 1 || replies[0] != "X-Reply-"+id+"=r"+id:
		return fmt.Errorf("request %d: reply headers %q", n, replies)
	case !bytes.Equal(got, wantBody):
		return fmt.Errorf("request %d: body of %d bytes; want the %d sent", n, len(got), len(wantBody))
	}
	return nil
}
