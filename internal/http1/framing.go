package http1

// Mode is how a message body is delimited.
type Mode uint8

const (
	None       Mode = iota // no body: the head ends the message
	Length                 // Content-Length bytes
	Chunked                // the chunked transfer coding
	UntilClose             // everything until the connection closes (responses only)
)

// Framing is where a message's body ends, and whether its connection may carry another
// message.
type Framing struct {
	Mode   Mode
	Length int64 // the body's length when Mode is Length
	Close  bool  // the connection ends after this message
}

// Fields collects the framing fields of one message head, as the head is read. Reset it
// before each head; it belongs to the goroutine reading the head.
type Fields struct {
	length      int64 // -1: no Content-Length
	codings     int   // Transfer-Encoding fields seen
	chunkedLast bool  // the last Transfer-Encoding field ends with chunked
	onlyChunked bool  // every Transfer-Encoding field is exactly "chunked"
	close       bool  // Connection lists close
	keepAlive   bool  // Connection lists keep-alive
	// chunkedLength lets a chunked request carry Content-Length too (allow_chunked_length).
	chunkedLength bool
}

// Reset prepares f for a new head.
func (f *Fields) Reset() { *f = Fields{length: -1, onlyChunked: true} }

// ContentLength takes one Content-Length value: digits only, and equal to any earlier one
// (RFC 9110 §8.6 lets a recipient accept repeated equal values).
func (f *Fields) ContentLength(value string) error { return f.setLength(ParseLength(value)) }

// ContentLengthBytes is ContentLength for a value read into a byte slice.
func (f *Fields) ContentLengthBytes(value []byte) error { return f.setLength(ParseLength(value)) }

// The generic helpers here take values, not *Fields: a pointer passed to a generic function
// escapes, and a head's Fields live on the stack of the goroutine reading it.
func (f *Fields) setLength(n int64, ok bool) error {
	if !ok || (f.length >= 0 && n != f.length) {
		return ErrMalformed
	}
	f.length = n
	return nil
}

// ParseLength parses a Content-Length value: 1 to 18 decimal digits, so it fits an int64.
func ParseLength[T text](v T) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// TransferEncoding takes one Transfer-Encoding value.
func (f *Fields) TransferEncoding(value string) {
	f.setCoding(EqualFold(value, "chunked"), chunkedLast(value))
}

// TransferEncodingBytes is TransferEncoding for a value read into a byte slice.
func (f *Fields) TransferEncodingBytes(value []byte) {
	f.setCoding(EqualFold(value, "chunked"), chunkedLast(value))
}

func (f *Fields) setCoding(only, last bool) {
	f.codings++
	f.onlyChunked = f.onlyChunked && only
	f.chunkedLast = last
}

// chunkedLast reports whether the last coding a Transfer-Encoding value lists is chunked.
func chunkedLast[T text](value T) bool {
	last := value
	for i := len(value) - 1; i >= 0; i-- {
		if value[i] == ',' {
			last = value[i+1:]
			break
		}
	}
	return EqualFold(TrimOWS(last), "chunked")
}

// Connection takes one Connection value, noting close and keep-alive. It reports whether the
// value lists upgrade (RFC 9110 §7.8), which a server needs to decide an upgrade.
func (f *Fields) Connection(value string) (upgrade bool) {
	c, k, u := connectionTokens(value)
	f.setConnection(c, k)
	return u
}

// ConnectionBytes is Connection for a value read into a byte slice.
func (f *Fields) ConnectionBytes(value []byte) (upgrade bool) {
	c, k, u := connectionTokens(value)
	f.setConnection(c, k)
	return u
}

// connectionTokens reads a Connection value's list in one pass.
func connectionTokens[T text](value T) (close, keepAlive, upgrade bool) {
	for len(value) > 0 {
		var t T
		t, value = CutList(value)
		switch len(t) {
		case len("close"):
			close = close || EqualFold(t, "close")
		case len("keep-alive"):
			keepAlive = keepAlive || EqualFold(t, "keep-alive")
		case len("upgrade"):
			upgrade = upgrade || EqualFold(t, "upgrade")
		}
	}
	return close, keepAlive, upgrade
}

func (f *Fields) setConnection(close, keepAlive bool) {
	f.close = f.close || close
	f.keepAlive = f.keepAlive || keepAlive
}

// ChunkedWithLength reports a head with both Transfer-Encoding and Content-Length, which
// Envoy refuses unless allow_chunked_length.
func (f *Fields) ChunkedWithLength() bool { return f.codings > 0 && f.length >= 0 }

// Length returns the Content-Length read, or -1.
func (f *Fields) Length() int64 { return f.length }

// Persistent reports whether the connection may carry another message after this one (RFC
// 9112 §9.3): HTTP/1.1 unless close was asked for, HTTP/1.0 only with keep-alive.
func (f *Fields) Persistent(minor int) bool {
	if f.close {
		return false
	}
	return minor >= 1 || f.keepAlive
}

// Request returns the framing of a request with the given minor version (rules 3 to 5 of
// the package doc), Close from Persistent.
func (f *Fields) Request(minor int) (Framing, error) {
	fr, err := f.request(minor)
	fr.Close = !f.Persistent(minor)
	return fr, err
}

func (f *Fields) request(minor int) (Framing, error) {
	switch {
	case f.codings > 0 && minor == 0:
		return Framing{}, ErrMalformed // RFC 9112 §6.1: HTTP/1.0 has no transfer codings
	case f.codings > 0 && (f.codings > 1 || !f.onlyChunked):
		return Framing{}, ErrUnsupportedCoding
	case f.codings > 0 && f.length >= 0 && !f.chunkedLength:
		return Framing{}, ErrMalformed
	case f.codings > 0:
		return Framing{Mode: Chunked}, nil
	case f.length > 0:
		return Framing{Mode: Length, Length: f.length}, nil
	}
	return Framing{Mode: None}, nil
}

// Response returns the framing of a response with the given status and minor version, to a
// HEAD request when head is set (rules 1, 2, 4 and 5 of the package doc).
func (f *Fields) Response(status, minor int, head bool) Framing {
	fr := Framing{Close: !f.Persistent(minor)}
	switch {
	case status == 101:
		fr.Close = true
	case head || status < 200 || status == 204 || status == 304:
	case f.codings > 0 && minor == 0:
		// RFC 9112 §6.1: the framing of an HTTP/1.0 message with Transfer-Encoding is faulty.
		// Like net/http, take its Content-Length or read until close; never reuse it.
		fr.Close = true
		fr.Mode, fr.Length = UntilClose, 0
		if f.length > 0 {
			fr.Mode, fr.Length = Length, f.length
		} else if f.length == 0 {
			fr.Mode = None
		}
	case f.codings > 0 && f.chunkedLast:
		fr.Mode = Chunked
		fr.Close = fr.Close || f.length >= 0
	case f.codings > 0:
		fr.Mode, fr.Close = UntilClose, true
	case f.length > 0:
		fr.Mode, fr.Length = Length, f.length
	case f.length == 0:
	default:
		fr.Mode, fr.Close = UntilClose, true
	}
	return fr
}
