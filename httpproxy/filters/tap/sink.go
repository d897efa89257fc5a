package tap

import (
	"fmt"
	"os"

	tapconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/tap/v3"
	tapdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/tap/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/pbjson"
)

// active is a tap configuration in force on a filter, with its sink: an attached admin
// session (streaming_admin) or files (file_per_tap). Immutable.
type active struct {
	cfg     *Config
	session *Session // streaming_admin; nil for file_per_tap
}

// submit writes one message of trace id to the sink; first says it is the trace's first
// (a file_per_tap file is created then, and appended to by the following segments).
func (a *active) submit(id uint64, tw *tapdatav3.TraceWrapper, first bool) {
	bodiesAsString(tw, a.cfg.format)
	if a.session != nil {
		a.session.push(tw)
		return
	}
	// As in Envoy, a file that cannot be written loses the trace and nothing else happens.
	_ = writeFile(a.cfg.pathPrefix, id, tw, a.cfg.format, first)
}

// FileName is the file file_per_tap writes trace id to: <path_prefix>_<id> and the
// format's extension (.json for both JSON formats, .pb, .pb_length_delimited, .pb_text), as
// Envoy names it.
func FileName(prefix string, id uint64, f Format) string {
	ext := ".json"
	switch f {
	case tapconfigv3.OutputSink_PROTO_BINARY:
		ext = ".pb"
	case tapconfigv3.OutputSink_PROTO_BINARY_LENGTH_DELIMITED:
		ext = ".pb_length_delimited"
	case tapconfigv3.OutputSink_PROTO_TEXT:
		ext = ".pb_text"
	}
	return fmt.Sprintf("%s_%d%s", prefix, id, ext)
}

func writeFile(prefix string, id uint64, tw *tapdatav3.TraceWrapper, f Format, first bool) error {
	b, err := Encode(nil, tw, f)
	if err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if first {
		flags |= os.O_TRUNC
	}
	file, err := os.OpenFile(FileName(prefix, id, f), flags, 0o644)
	if err != nil {
		return err
	}
	_, err = file.Write(b)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return err
}

// Encode appends tw in format f to dst: the JSON formats as Envoy's pretty JSON with every
// field printed (MessageUtil::getJsonStringFromMessage(message, true, true)), binary, binary
// preceded by its length as a varint, or proto text.
func Encode(dst []byte, tw *tapdatav3.TraceWrapper, f Format) ([]byte, error) {
	switch f {
	case tapconfigv3.OutputSink_JSON_BODY_AS_BYTES, tapconfigv3.OutputSink_JSON_BODY_AS_STRING:
		b, err := pbjson.Marshal(tw, pbjson.AllFields)
		return append(dst, b...), err
	case tapconfigv3.OutputSink_PROTO_BINARY:
		return proto.MarshalOptions{}.MarshalAppend(dst, tw)
	case tapconfigv3.OutputSink_PROTO_BINARY_LENGTH_DELIMITED:
		dst = protowire.AppendVarint(dst, uint64(proto.Size(tw)))
		return proto.MarshalOptions{}.MarshalAppend(dst, tw)
	case tapconfigv3.OutputSink_PROTO_TEXT:
		b, err := prototext.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(tw)
		return append(dst, b...), err
	}
	return dst, fmt.Errorf("tap: output format %d is not known", f)
}

// bodiesAsString moves body bytes into as_string for JSON_BODY_AS_STRING, so JSON shows the
// body as text rather than base64 (Envoy's Utility::bodyBytesToString).
func bodiesAsString(tw *tapdatav3.TraceWrapper, f Format) {
	if f != tapconfigv3.OutputSink_JSON_BODY_AS_STRING {
		return
	}
	swap := func(b *tapdatav3.Body) {
		if v, ok := b.GetBodyType().(*tapdatav3.Body_AsBytes); ok {
			b.BodyType = &tapdatav3.Body_AsString{AsString: string(v.AsBytes)}
		}
	}
	if t := tw.GetHttpBufferedTrace(); t != nil {
		swap(t.GetRequest().GetBody())
		swap(t.GetResponse().GetBody())
	}
	if s := tw.GetHttpStreamedTraceSegment(); s != nil {
		swap(s.GetRequestBodyChunk())
		swap(s.GetResponseBodyChunk())
	}
}
