package httpproxy

import (
	"bytes"
	"io"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2ConnectionSpecificFields checks that a request with a connection-specific field or a
// TE other than "trailers" is reset with PROTOCOL_ERROR (RFC 9113 §8.2.2) and not forwarded,
// and that the connection's HPACK state stays in step: the client indexes every field, and
// later requests on the same connection, which refer to those entries, are served.
func TestH2ConnectionSpecificFields(t *testing.T) {
	e, reached := countingEnv(t)
	fr, _ := frameClient(t, e.addr)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block) // the connection's one encoder: every field is indexed
	id := uint32(1)
	send := func(fields ...string) string {
		t.Helper()
		block.Reset()
		all := append([]string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/"}, fields...)
		for i := 0; i+1 < len(all); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: all[i], Value: all[i+1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		id += 2
		return answerCode(t, fr, id-2)
	}
	for _, tc := range []struct {
		fields []string
		want   string
	}{
		{fields: []string{"connection", "keep-alive"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"x-a", "1", "keep-alive", "timeout=5"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"proxy-connection", "close"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"transfer-encoding", "chunked"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"upgrade", "websocket"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"te", "trailers, deflate"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"te", "trailers", "x-a", "1"}, want: "200"},
		// The same fields again, now from the dynamic table.
		{fields: []string{"connection", "keep-alive"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"te", "trailers, deflate"}, want: "reset PROTOCOL_ERROR"},
		{fields: []string{"x-a", "1"}, want: "200"},
	} {
		before := reached.Load()
		if got := send(tc.fields...); got != tc.want {
			t.Errorf("request with %q: %s; want %s", tc.fields, got, tc.want)
		}
		want := int64(0)
		if tc.want == "200" {
			want = 1
		}
		if got := reached.Load() - before; got != want {
			t.Errorf("request with %q: upstream saw %d requests; want %d", tc.fields, got, want)
		}
	}
}

// TestH2RepeatedSetting checks that a SETTINGS frame giving a parameter twice is applied in
// order (RFC 9113 §6.5.3: the last value holds) and acknowledged, not refused.
func TestH2RepeatedSetting(t *testing.T) {
	up := h2cUpstream(t, "up")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	fr, _ := frameClient(t, e.addr)
	if err := fr.WriteSettings(
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1},
	); err != nil {
		t.Fatal(err)
	}
	writeRequest(t, fr, 1, "/", nil)
	var acks int
	var data []int
	for len(data) == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d settings acks, data %v: %v", acks, data, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				acks++
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v; want the settings applied", f.ErrCode)
		case *http2.DataFrame:
			data = append(data, len(f.Data())) // the window of 1 lets one byte through
		}
	}
	// The server may acknowledge both SETTINGS frames (the client's first and this one) at once.
	if acks == 0 || data[0] != 1 {
		t.Errorf("settings acks %d, first DATA %v; want an ack and one byte", acks, data)
	}
}

// TestH2TableSizeUpdateAfterSetting checks that after the client changes
// SETTINGS_HEADER_TABLE_SIZE the next response header block starts with a dynamic table size
// update to 0 (RFC 7541 §4.2; nghttp2 requires it), and only that one.
func TestH2TableSizeUpdateAfterSetting(t *testing.T) {
	up := h2cUpstream(t, "up")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c := dialRaw(t, e.addr).c
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var firsts []byte
	for id := uint32(1); id <= 3; id += 2 {
		writeRequest(t, fr, id, "/", nil)
		for len(firsts) < int(id+1)/2 {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("stream %d: %v", id, err)
			}
			if h, ok := f.(*http2.HeadersFrame); ok && h.StreamID == id {
				firsts = append(firsts, h.HeaderBlockFragment()[0])
			}
		}
	}
	if firsts[0] != 0x20 || firsts[1] == 0x20 {
		t.Errorf("header blocks start with %#x, %#x; want 0x20 (table size 0) first only", firsts[0], firsts[1])
	}
}
