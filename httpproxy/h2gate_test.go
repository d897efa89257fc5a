package httpproxy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	// http2 may acknowledge both SETTINGS frames (the client's first and this one) at once.
	if acks == 0 || data[0] != 1 {
		t.Errorf("settings acks %d, first DATA %v; want an ack and one byte", acks, data)
	}
}

// TestFrameGate feeds a client's frames through the wire in small pieces and reads them back
// with reads of several sizes, as http2 would: every frame arrives whole and in order, a
// SETTINGS frame repeating a parameter keeps only its last value, a header block with a
// connection-specific field (padded, with priority, continued) becomes a stream error for
// http2's framer while the HPACK state stays in step, and other frames are untouched.
func TestFrameGate(t *testing.T) {
	var in bytes.Buffer
	in.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&in, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := func(kv ...string) []byte {
		block.Reset()
		all := append([]string{":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/"}, kv...)
		for i := 0; i+1 < len(all); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: all[i], Value: all[i+1]})
		}
		return append([]byte(nil), block.Bytes()...)
	}
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
	bad := fields("connection", "close", "x-long", string(bytes.Repeat([]byte("v"), 300)))
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: bad[:10], PadLength: 7,
		Priority: http2.PriorityParam{StreamDep: 0, Weight: 15}})
	fr.WriteContinuation(1, false, bad[10:100])
	fr.WriteContinuation(1, true, bad[100:])
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<10) // one 16 KiB DATA frame
	good := fields("x-long", string(bytes.Repeat([]byte("v"), 300)), "te", "trailers")
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: good, EndHeaders: true})
	fr.WriteData(3, true, body)
	fr.WritePing(false, [8]byte{1, 2, 3})
	stream := in.Bytes()

	for _, size := range []int{1, 9, 100, h2ReadBuffer, 3 * h2ReadBuffer} {
		a, b := net.Pipe()
		go func() {
			for p := stream; len(p) > 0; p = p[min(7, len(p)):] {
				b.Write(p[:min(7, len(p))])
			}
			b.Close()
		}()
		w := &h2wire{Conn: a, gate: frameGate{skip: h2PrefaceLen}}
		var out bytes.Buffer
		buf := make([]byte, size)
		for {
			n, err := w.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				break
			}
		}
		got := out.Bytes()
		if !bytes.HasPrefix(got, []byte(http2.ClientPreface)) {
			t.Fatalf("reads of %d: no preface", size)
		}
		rd := http2.NewFramer(nil, bytes.NewReader(got[len(http2.ClientPreface):]))
		rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		var seen []string
		for {
			f, err := rd.ReadFrame()
			if err != nil {
				var se http2.StreamError
				if errors.As(err, &se) {
					seen = append(seen, fmt.Sprintf("stream error %d %v", se.StreamID, se.Code))
					continue
				}
				break
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				var vals []string
				f.ForeachSetting(func(s http2.Setting) error {
					vals = append(vals, s.String())
					return nil
				})
				seen = append(seen, fmt.Sprintf("settings %v dup %v", vals, f.HasDuplicates()))
			case *http2.MetaHeadersFrame:
				seen = append(seen, fmt.Sprintf("headers %d te=%s", f.StreamID, f.Fields[len(f.Fields)-1].Value))
			case *http2.DataFrame:
				seen = append(seen, fmt.Sprintf("data %d %v", f.StreamID, bytes.Equal(f.Data(), body)))
			case *http2.PingFrame:
				seen = append(seen, "ping")
			}
		}
		want := []string{
			"settings [[UNKNOWN_SETTING_61440 = 100] [MAX_FRAME_SIZE = 16384] [INITIAL_WINDOW_SIZE = 1]] dup false",
			"stream error 1 PROTOCOL_ERROR",
			"headers 3 te=trailers",
			"data 3 true",
			"ping",
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("reads of %d: frames (-want +got):\n%s", size, diff)
		}
	}
}

// FuzzFrameGate feeds arbitrary client bytes after the preface through the wire, read in
// pieces of a fuzzed size: it must not panic, must hand every byte over in order, and may
// only add whole poison fields (4 bytes each).
func FuzzFrameGate(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 2})
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, kv := range [][2]string{{":method", "GET"}, {":path", "/"}, {"connection", "close"}, {"te", "gzip"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes()[:3], PadLength: 2})
	fr.WriteContinuation(1, true, block.Bytes()[3:])
	fr.WriteData(1, true, []byte("body"))
	f.Add(seed.Bytes(), uint16(1))
	f.Add(seed.Bytes(), uint16(9000))
	f.Add([]byte{0, 0, 5, 1, 0x2c, 0, 0, 0, 1, 9, 0x20}, uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, size uint16) {
		a, b := net.Pipe()
		go func() {
			b.Write([]byte(http2.ClientPreface))
			b.Write(in)
			b.Close()
		}()
		w := &h2wire{Conn: a, gate: frameGate{skip: h2PrefaceLen}}
		var out bytes.Buffer
		buf := make([]byte, int(size)%(3*h2ReadBuffer)+1)
		for {
			n, err := w.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				break
			}
		}
		a.Close()
		got := out.Bytes()[len(http2.ClientPreface):]
		if extra := len(got) - len(in); extra < 0 || extra%len(poisonField) != 0 {
			t.Fatalf("%d bytes in, %d out", len(in), len(got))
		}
		if len(got) == len(in) && !bytes.Equal(got, in) && !bytes.Contains(in, []byte{0, 0}) {
			// Only SETTINGS identifiers change in place; the frames that carry them have a
			// length whose first byte is 0, so an input without two zero bytes is never one.
			t.Fatalf("bytes changed: %x -> %x", in, got)
		}
	})
}
