package tap

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// BenchmarkFilterIdle is the cost the filter adds to a stream while nothing is tapped.
func BenchmarkFilterIdle(b *testing.B) {
	f := tapFilter(b, NewManager(), adminFilter)
	x := &filter.Exchange{Request: request(map[string]string{"x-tap": "1"})}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		if st := f.NewStream(x); st != nil {
			b.Fatal("NewStream without a session is not nil")
		}
		f.OnRequest(x)
		f.OnResponse(x, h)
	}
}

// BenchmarkFilterTapped is a matching stream traced to an admin session (the reader
// drains the session as the admin handler would, without encoding).
func BenchmarkFilterTapped(b *testing.B) {
	m := NewManager()
	f := tapFilter(b, m, adminFilter)
	s := attach(b, m, `{config_id: demo, tap_config: {match: {http_request_headers_match: {headers: [{name: x-tap, present_match: true}]}}, output_config: {sinks: [{streaming_admin: {}}]}}}`)
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-s.Traces():
			case <-stop:
				return
			}
		}
	}()
	x := &filter.Exchange{Request: request(map[string]string{"x-tap": "1", "User-Agent": "bench"})}
	h := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"5"}}
	body := []byte("hello")
	b.ReportAllocs()
	for b.Loop() {
		st := f.NewStream(x)
		st.ResponseHeaders(200, h)
		st.ResponseBody(body)
		st.End()
	}
	close(stop)
	<-done
}

// BenchmarkBodyMatch is the generic body matcher over a 64 KiB body in 4 KiB chunks.
func BenchmarkBodyMatch(b *testing.B) {
	m, err := compileMatcher(predicate(b, `http_request_generic_body_match: {patterns: [{string_match: "needle-not-there"}, {string_match: "other"}]}`), "match")
	if err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 2048)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s := m.newState()
		for i := 0; i < len(body); i += 4096 {
			s.onBody(evRequestBody, body[i:i+4096])
		}
	}
}

// BenchmarkEncodeJSON is one buffered trace printed as the admin stream prints it.
func BenchmarkEncodeJSON(b *testing.B) {
	m := NewManager()
	f := tapFilter(b, m, adminFilter)
	s := attach(b, m, `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`)
	stream(f.NewTapper(), map[string]string{"a": "b", "c": "d"}, []string{"request body"}, nil, 200, map[string]string{"e": "f"}, []string{"response body"}, nil)
	tw := next(b, s)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = Encode(buf[:0], tw, s.Format())
	}
}
