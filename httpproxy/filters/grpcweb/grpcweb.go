package grpcweb

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	grpcwebv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
)

// Name and TypeURL select the filter in http_filters.
const (
	Name    = "envoy.filters.http.grpc_web"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb"
)

// The content types of gRPC-Web and gRPC.
const (
	ctGRPC          = "application/grpc"
	ctWeb           = "application/grpc-web"
	ctWebProto      = "application/grpc-web+proto"
	ctWebText       = "application/grpc-web-text"
	ctWebTextProto  = "application/grpc-web-text+proto"
	trailerFlag     = 0x80     // a gRPC-Web frame that carries the trailers
	maxGRPCMessage  = 16 << 10 // the most of a non-gRPC body that becomes grpc-message
	defaultAcceptEn = "identity,deflate,gzip"
)

// errBadBase64 is a grpc-web-text request body that is not base64 (a length that is not a
// multiple of 4 at its end, or a bad character).
var errBadBase64 = errors.New("grpc_web: bad gRPC-web request, invalid base64 data")

// Register registers the filter.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &grpcwebv3.GrpcWeb{}, filter.Extension{
		New: func(cfg *anypb.Any, _ *filter.Context) (filter.Filter, error) { return FromAny(cfg) },
	})
}

// Filter is the gRPC-Web filter. It has no configuration; safe for concurrent use.
type Filter struct{}

// FromAny builds the filter; its typed_config (GrpcWeb, which has no fields) may be absent.
func FromAny(cfg *anypb.Any) (*Filter, error) {
	if cfg != nil && cfg.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("%s: typed_config: type %q; want %s", Name, cfg.GetTypeUrl(), TypeURL)
	}
	if cfg != nil {
		var pb grpcwebv3.GrpcWeb
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	return &Filter{}, nil
}

// stream is what the filter keeps of a gRPC-Web request for its response.
type stream struct{ textResponse bool }

// OnRequest turns a gRPC-Web request into a gRPC one: content-type application/grpc, te:
// trailers, grpc-accept-encoding, no content-length, and a grpc-web-text body decoded from
// base64 as it streams.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	h := x.Request.Header
	ct := h.Get("Content-Type")
	switch ct {
	case ctWeb, ctWebProto, ctWebText, ctWebTextProto:
	default:
		return nil
	}
	h.Del("Content-Length")
	h.Set("Content-Type", ctGRPC)
	accept := h.Get("Accept")
	x.Keep(f, &stream{textResponse: accept == ctWebText || accept == ctWebTextProto})
	h.Set("Te", "trailers")
	if len(h.Values("Grpc-Accept-Encoding")) == 0 {
		h.Set("Grpc-Accept-Encoding", defaultAcceptEn)
	}
	if ct == ctWebText || ct == ctWebTextProto {
		x.RewriteRequestBody(func(src filter.Body) io.Reader { return &textDecoder{src: src} })
	}
	return nil
}

// OnResponse turns the response of a gRPC-Web request into a gRPC-Web one: its content type,
// its trailers as the body's last frame (base64 frame by frame for grpc-web-text), and a
// response that is not gRPC (a local reply, an HTTP error) into grpc-status and grpc-message
// headers with an empty body.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	st, _ := x.Kept(f).(*stream)
	if st == nil {
		return
	}
	end := x.ResponseLength == 0 || x.Status < 200 || x.Status == http.StatusNoContent || x.Status == http.StatusNotModified
	transform := !isGRPCResponse(x.Status, h, end) && !isWebProtoResponse(x.Status, h)
	h.Del("Content-Length")
	if st.textResponse {
		h.Set("Content-Type", ctWebTextProto)
	} else {
		h.Set("Content-Type", ctWebProto)
	}
	switch {
	case end:
		// A trailers-only response: its grpc-status is in the headers, as gRPC-Web allows.
	case transform:
		status := x.Status
		x.HoldResponseHeaders()
		x.RewriteResponseBody(func(src filter.Body) io.Reader { return &statusFromBody{src: src, h: h, status: status} })
	default:
		text := st.textResponse
		x.RewriteResponseBody(func(src filter.Body) io.Reader { return &webEncoder{src: src, text: text} })
	}
}

// isGRPCResponse is Envoy's isGrpcResponseHeaders: a trailers-only response with grpc-status,
// or a 200 with a gRPC content type.
func isGRPCResponse(status int, h http.Header, end bool) bool {
	if end {
		return h.Get("Grpc-Status") != ""
	}
	ct := h.Get("Content-Type")
	return status == http.StatusOK && (ct == ctGRPC || strings.HasPrefix(ct, ctGRPC+"+") || strings.HasPrefix(ct, ctGRPC+";"))
}

// isWebProtoResponse: a 200 that is already proto-encoded gRPC-Web.
func isWebProtoResponse(status int, h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	ct = strings.TrimRight(ct, " \t")
	return status == http.StatusOK && (strings.EqualFold(ct, ctWebProto) || strings.EqualFold(ct, ctWeb))
}

// textDecoder decodes a grpc-web-text body from base64, four characters at a time as they
// arrive (a client may pad each message, so padding may come mid-body).
type textDecoder struct {
	src   filter.Body
	buf   [4096]byte
	carry [4]byte
	nc    int
	out   []byte
	done  bool
}

func (d *textDecoder) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.done {
			return 0, io.EOF
		}
		if err := d.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

func (d *textDecoder) fill() error {
	n, err := d.src.Read(d.buf[:])
	in := d.buf[:n]
	d.out = d.out[:0]
	for len(in) > 0 {
		k := copy(d.carry[d.nc:], in)
		d.nc += k
		in = in[k:]
		if d.nc < 4 {
			break
		}
		var group [3]byte
		m, derr := base64.StdEncoding.Decode(group[:], d.carry[:])
		if derr != nil {
			return errBadBase64
		}
		d.out = append(d.out, group[:m]...)
		d.nc = 0
	}
	switch {
	case err == io.EOF:
		if d.nc != 0 {
			return errBadBase64
		}
		d.done = true
	case err != nil:
		return err
	}
	return nil
}

// webEncoder passes a gRPC response body on, base64-encoding each whole frame for
// grpc-web-text, and ends it with the trailers frame (the trailers are then not sent).
type webEncoder struct {
	src     filter.Body
	text    bool
	frames  []byte // grpc-web-text: bytes of the frame being read
	buf     [8192]byte
	pending []byte
	done    bool
}

func (e *webEncoder) Read(p []byte) (int, error) {
	for len(e.pending) == 0 {
		if e.done {
			return 0, io.EOF
		}
		if !e.text {
			n, err := e.src.Read(p)
			if err == io.EOF {
				e.finish()
				if n > 0 {
					return n, nil
				}
				continue
			}
			return n, err
		}
		n, err := e.src.Read(e.buf[:])
		e.frames = append(e.frames, e.buf[:n]...)
		e.pending = e.encodeFrames(e.pending[:0])
		if err == io.EOF {
			e.finish()
		} else if err != nil {
			return 0, err
		}
	}
	n := copy(p, e.pending)
	e.pending = e.pending[n:]
	return n, nil
}

// encodeFrames appends the base64 of each whole frame read so far to dst.
func (e *webEncoder) encodeFrames(dst []byte) []byte {
	for len(e.frames) >= 5 {
		size := 5 + int(binary.BigEndian.Uint32(e.frames[1:5]))
		if len(e.frames) < size {
			break
		}
		dst = base64.StdEncoding.AppendEncode(dst, e.frames[:size])
		e.frames = e.frames[size:]
	}
	return dst
}

// finish appends the trailers frame, when the response has trailers, and takes them out of
// the response.
func (e *webEncoder) finish() {
	e.done = true
	t := e.src.Trailers()
	if len(t) == 0 {
		return
	}
	frame := trailerFrame(t)
	clear(t)
	if e.text {
		frame = base64.StdEncoding.AppendEncode(nil, frame)
	}
	e.pending = append(e.pending, frame...)
}

// trailerFrame is the gRPC-Web trailers frame: flag 0x80, the length, then "name:value\r\n"
// lines, names in lower case, grpc-status and grpc-message first.
func trailerFrame(t http.Header) []byte {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		switch strings.ToLower(k) {
		case "grpc-status":
			return 0
		case "grpc-message":
			return 1
		}
		return 2
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	var body []byte
	for _, k := range keys {
		for _, v := range t[k] {
			body = append(body, strings.ToLower(k)...)
			body = append(body, ':')
			body = append(body, v...)
			body = append(body, '\r', '\n')
		}
	}
	frame := make([]byte, 5, 5+len(body))
	frame[0] = trailerFlag
	binary.BigEndian.PutUint32(frame[1:], uint32(len(body)))
	return append(frame, body...)
}

// statusFromBody turns a response that is not gRPC into gRPC-Web status headers (the head
// waits for it): grpc-status from the HTTP status, grpc-message from the body's first 16 KiB,
// percent-encoded; the body itself is dropped.
type statusFromBody struct {
	src    filter.Body
	h      http.Header
	status int
}

func (s *statusFromBody) Read([]byte) (int, error) {
	msg, err := io.ReadAll(io.LimitReader(s.src, maxGRPCMessage))
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, s.src); err != nil {
		return 0, err
	}
	s.h.Set("Grpc-Message", percentEncode(msg))
	s.h.Set("Grpc-Status", strconv.Itoa(grpcStatus(s.status)))
	return 0, io.EOF
}

// percentEncode encodes what is not printable ASCII, and '%', as gRPC's grpc-message wants.
func percentEncode(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&sb, "%%%02X", c)
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// grpcStatus maps an HTTP status to a gRPC status code, as gRPC's HTTP mapping.
func grpcStatus(status int) int {
	switch status {
	case http.StatusBadRequest:
		return 13 // INTERNAL
	case http.StatusUnauthorized:
		return 16 // UNAUTHENTICATED
	case http.StatusForbidden:
		return 7 // PERMISSION_DENIED
	case http.StatusNotFound:
		return 12 // UNIMPLEMENTED
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}
