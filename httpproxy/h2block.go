package httpproxy

import (
	"encoding/binary"
	"io"
	"strings"

	"github.com/legateproxy/legate/internal/http1"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The reader decodes each header block itself (HEADERS and its CONTINUATION frames) with the
// connection's HPACK decoder, whose emit function files the fields into h2block, reused from
// block to block: x/net/http2's ReadMetaHeaders built a MetaHeadersFrame, a growing field
// slice and a closure's captured variables per block, a third of a request's allocations.
// The checks are the same as there (RFC 9113 §8.2, §8.3): field names lower-case tokens,
// values without control characters, pseudo-header fields known, once each and first, the
// header list within SETTINGS_MAX_HEADER_LIST_SIZE.

// h2block is the header block being decoded, then handed to headers.
type h2block struct {
	id     uint32
	ended  bool   // END_STREAM
	dep    uint32 // the priority's stream dependency, when prio
	prio   bool
	pseudo h2pseudo
	fields []hpack.HeaderField // the regular fields, in order
	// invalid is a field that breaks the rules: the stream is reset, and a CONTINUATION
	// following it ends the connection. badPseudo is a misused pseudo-header field, which
	// resets the stream only.
	invalid    bool
	badPseudo  bool
	sawRegular bool
	truncated  bool   // the list went over the limit: the request is refused with 431
	remain     uint32 // what the limit leaves
}

// h2pseudo holds a request's pseudo-header fields; seen has a bit per field present.
type h2pseudo struct {
	method, path, scheme, authority, protocol string
	seen                                      uint8
}

// reset readies b for the block of a HEADERS frame; limit is SETTINGS_MAX_HEADER_LIST_SIZE.
func (b *h2block) reset(fh http2.FrameHeader, limit uint32) {
	clear(b.fields) // drops the last block's strings
	*b = h2block{id: fh.StreamID, ended: fh.Flags.Has(http2.FlagHeadersEndStream), fields: b.fields[:0], remain: limit}
}

// emit files one decoded field (the decoder's emit function).
func (b *h2block) emit(hf hpack.HeaderField) {
	if b.invalid || b.truncated {
		return
	}
	if !http1.ValidValue(hf.Value) {
		b.invalid = true
		return
	}
	if strings.HasPrefix(hf.Name, ":") {
		if b.sawRegular {
			b.invalid = true
			return
		}
		b.pseudoField(hf)
	} else {
		b.sawRegular = true
		if !validWireName(hf.Name) {
			b.invalid = true
			return
		}
	}
	size := hf.Size()
	if size > b.remain {
		b.truncated, b.remain = true, 0
		return
	}
	b.remain -= size
	if b.sawRegular {
		b.fields = append(b.fields, hf)
	}
}

// pseudoField files a pseudo-header field; one unknown or repeated marks badPseudo.
func (b *h2block) pseudoField(hf hpack.HeaderField) {
	p := &b.pseudo
	var at *string
	var bit uint8
	switch hf.Name {
	case ":method":
		at, bit = &p.method, 1
	case ":path":
		at, bit = &p.path, 2
	case ":scheme":
		at, bit = &p.scheme, 4
	case ":authority":
		at, bit = &p.authority, 8
	case ":protocol":
		at, bit = &p.protocol, 16
	default: // :status included: a request has none
		b.badPseudo = true
		return
	}
	if p.seen&bit != 0 {
		b.badPseudo = true
		return
	}
	p.seen |= bit
	*at = hf.Value
}

// validWireName reports whether a field name is a token without upper-case letters.
func validWireName(s string) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !http1.IsTokenChar(c) || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// readHeaderBlock reads the header block that the HEADERS frame fh starts, with its
// CONTINUATION frames, and decodes it into c.blk.
func (c *h2conn) readHeaderBlock(fh http2.FrameHeader) error {
	if fh.StreamID == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	b := &c.blk
	b.reset(fh, c.listLimit)
	c.dec.SetEmitEnabled(true)
	p, err := c.payload(fh.Length)
	if err != nil {
		return err
	}
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			return http2.ConnectionError(http2.ErrCodeFrameSize)
		}
		pad := int(p[0])
		p = p[1:]
		if pad > len(p) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		p = p[:len(p)-pad]
	}
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return http2.ConnectionError(http2.ErrCodeFrameSize)
		}
		b.prio, b.dep = true, binary.BigEndian.Uint32(p)&(1<<31-1)
		p = p[5:]
	}
	end := fh.Flags.Has(http2.FlagHeadersEndHeaders)
	for {
		if err := c.decodeFragment(p); err != nil {
			return err
		}
		c.consumed()
		if end {
			break
		}
		// The framer checks that a CONTINUATION of the same stream comes next.
		fh, err := c.fr.ReadFrameHeader()
		if err != nil {
			return err
		}
		if p, err = c.payload(fh.Length); err != nil {
			return err
		}
		end = fh.Flags.Has(http2.FlagContinuationEndHeaders)
	}
	if c.dec.Close() != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if b.invalid || b.badPseudo {
		return http2.StreamError{StreamID: b.id, Code: http2.ErrCodeProtocol}
	}
	return nil
}

// decodeFragment decodes one frame's part of the block. A fragment far larger than the list
// may still be, or any after a field that broke the rules, ends the connection rather than
// being decoded (as x/net/http2 does: decoding it would be work spent on a refused block).
func (c *h2conn) decodeFragment(p []byte) error {
	b := &c.blk
	left := int64(0)
	if !b.truncated {
		left = int64(b.remain) + int64(c.listLimit)
	}
	if int64(len(p)) > 2*left || b.invalid && len(p) > 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if _, err := c.dec.Write(p); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if b.invalid || b.truncated {
		c.dec.SetEmitEnabled(false) // the table is still kept in step
	}
	return nil
}

// payload returns the next n bytes read, valid until consumed is called: a view of the read
// buffer when they fit in it, else a copy.
func (c *h2conn) payload(n uint32) ([]byte, error) {
	if int(n) <= c.rd.Size() {
		p, err := c.rd.Peek(int(n))
		if err != nil {
			return nil, err
		}
		c.peeked = int(n)
		return p, nil
	}
	if cap(c.big) < int(n) {
		c.big = make([]byte, n)
	}
	p := c.big[:n]
	if _, err := io.ReadFull(c.rd, p); err != nil {
		return nil, err
	}
	return p, nil
}

// consumed drops the bytes payload viewed in the read buffer.
func (c *h2conn) consumed() {
	c.rd.Discard(c.peeked)
	c.peeked = 0
}
