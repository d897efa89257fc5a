package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// wantTooLarge checks a 413 whose one-line body names the limit.
func wantTooLarge(t *testing.T, resp *http.Response, part string) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "admin request " + part + " exceeds the limit of " + strconv.Itoa(MaxRequestBytes) + " bytes"
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != want {
		t.Errorf("= %d %q; want 413 %q", resp.StatusCode, b, want)
	}
}

// TestOversizedRequestRefusedWhole: a form body or query over the limit
// reaches no handler (issue 18 defect 6: a cut body was applied in part);
// one at the limit is served whole.
func TestOversizedRequestRefusedWhole(t *testing.T) {
	var keys []int
	reg := NewRegistry()
	if err := reg.Register(Endpoint{Path: "/runtime_modify", Help: "modify", Mutates: true,
		Handle: func(w http.ResponseWriter, _ *http.Request, q Query) { keys = append(keys, len(q)) }}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{}, reg))
	defer srv.Close()
	// form returns n bytes of "kNNNNN=v&…" padded to exactly n.
	form := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n-16; i++ {
			b.WriteString("k" + strconv.Itoa(i) + "=v&")
		}
		b.WriteString("pad=" + strings.Repeat("x", n-b.Len()-4))
		return b.String()
	}
	post := func(body string, chunked bool) *http.Response {
		var r io.Reader = strings.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/runtime_modify", r)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	t.Run("body with length", func(t *testing.T) { wantTooLarge(t, post(form(MaxRequestBytes+1), false), "body") })
	t.Run("chunked body", func(t *testing.T) { wantTooLarge(t, post(form(MaxRequestBytes+1), true), "body") })
	t.Run("query", func(t *testing.T) {
		resp, err := http.Post(srv.URL+"/runtime_modify?"+form(MaxRequestBytes+1), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantTooLarge(t, resp, "query")
	})
	if len(keys) != 0 {
		t.Fatalf("handler ran %d times for oversized requests; want 0", len(keys))
	}
	body := form(MaxRequestBytes)
	resp := post(body, true)
	resp.Body.Close()
	if want := strings.Count(body, "="); resp.StatusCode != http.StatusOK || len(keys) != 1 || keys[0] != want {
		t.Errorf("a body of exactly the limit: status %d, handler saw %v keys; want 200 and [%d]", resp.StatusCode, keys, want)
	}
}

func TestTapBodyTooLarge(t *testing.T) {
	srv, _ := tapServer(t)
	defer srv.Close()
	wantTooLarge(t, postTap(t, context.Background(), srv.URL, "config_id: demo\n#"+strings.Repeat("x", MaxRequestBytes)), "body")
}
