package httpproxy

import (
	"encoding/binary"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frameGate holds each HEADERS, CONTINUATION and SETTINGS frame a client sends until it is
// buffered whole, and rewrites it before http2 reads it, for what http2 gets wrong:
//
//   - A request with a connection-specific field (connection, keep-alive, proxy-connection,
//     transfer-encoding, upgrade) or a TE other than "trailers" is malformed, a stream error
//     of type PROTOCOL_ERROR (RFC 9113 §8.2.2); http2 answers it 400 from a handler of its
//     own. The gate follows the client's header blocks with an HPACK decoder of its own (the
//     same table size as http2's) and ends such a block with one more field, never indexed,
//     whose name is invalid (upper case): http2 resets the stream with PROTOCOL_ERROR, and no
//     HPACK table changes.
//   - A SETTINGS frame that repeats a parameter is refused by http2 (PROTOCOL_ERROR, the
//     connection closes), while RFC 9113 §6.5.3 applies the values in order. The gate keeps
//     the last value of each: the earlier entries get identifiers no one defines, which
//     http2 ignores (RFC 9113 §6.5.2).
//
// It runs on http2's read goroutine, as h2wire.Read.
type frameGate struct {
	skip   int // connection preface bytes still to pass
	left   int // payload bytes of a frame passed as is, still to pass
	dec    *hpack.Decoder
	bad    bool // the header block being read is malformed
	broken bool // decoding failed: header blocks pass unread (http2 fails the connection)
	// maxStream is the highest stream a HEADERS frame named, for a GOAWAY from another
	// goroutine (h2reset.go).
	maxStream atomic.Uint32
	opening   bool // the header block being read opens a stream
}

// h2 frame types and flags the gate reads (RFC 9113 §6).
const (
	h2FrameRSTStream  = 0x3
	h2FlagPadded      = 0x8
	h2FlagPriority    = 0x20
	maxGatedFrame     = 16 << 10 // http2's SETTINGS_MAX_FRAME_SIZE (newH2Server)
	decoderTableSize  = 4096     // http2's HPACK decoder table (its default)
	maxGatedSettings  = 100      // http2 refuses SETTINGS frames with more parameters
	unknownSettingIDs = 0xf000   // where the identifiers of dropped repeats start
)

// poisonField is an HPACK literal field never indexed (RFC 7541 §6.2.3), name "X", empty
// value.
var poisonField = [...]byte{0x10, 0x01, 'X', 0x00}

// gates reports whether frames of type typ are held whole.
func gates(typ byte) bool {
	return typ == h2FrameHeaders || typ == h2FrameContinuation || typ == h2FrameSettings
}

// advance reads until buffered bytes may be handed to http2 (w.ready > 0), or fails.
func (w *h2wire) advance() error {
	g := &w.gate
	for {
		start := w.r + w.ready
		avail := w.w - start
		switch {
		case avail == 0:
		case g.skip > 0:
			k := min(g.skip, avail)
			g.skip -= k
			w.ready += k
			return nil
		case g.left > 0:
			k := min(g.left, avail)
			g.left -= k
			w.ready += k
			return nil
		case avail >= h2FrameHeaderLen:
			hdr := w.buf[start : start+h2FrameHeaderLen]
			length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
			if hdr[3] == h2FrameHeaders {
				g.opening = g.noteStream(binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff)
			}
			if !gates(hdr[3]) || length > maxGatedFrame {
				w.ready += h2FrameHeaderLen
				g.left = length
				return nil
			}
			if avail >= h2FrameHeaderLen+length {
				w.ready += w.gateFrame(start, length)
				return nil
			}
		}
		if err := w.fill(); err != nil {
			if avail > 0 { // what there is goes as is; the failure comes next
				w.ready += avail
				g.broken = true
			}
			return err
		}
	}
}

// noteStream follows the highest stream a HEADERS frame named and reports whether id opens
// a stream (a HEADERS frame of an open one is trailers).
func (g *frameGate) noteStream(id uint32) bool {
	if id > g.maxStream.Load() {
		g.maxStream.Store(id)
		return true
	}
	return false
}

// fill reads more of the connection into buf, keeping the bytes not yet handed over.
func (w *h2wire) fill() error {
	if w.buf == nil {
		w.buf = make([]byte, h2ReadBuffer)
	}
	if w.r > 0 {
		w.w = copy(w.buf, w.buf[w.r:w.w])
		w.r = 0
	}
	if w.w == len(w.buf) { // a frame held whole is larger than the buffer
		w.buf = append(w.buf, make([]byte, len(w.buf))...)
	}
	n, err := w.Conn.Read(w.buf[w.w:])
	w.arrived(w.buf[w.w : w.w+n])
	w.w += n
	if n > 0 {
		return nil
	}
	return err
}

// gateFrame rewrites the whole frame at buf[start:] as needed and returns its size.
func (w *h2wire) gateFrame(start, length int) int {
	f := w.buf[start : start+h2FrameHeaderLen+length]
	if f[3] == h2FrameSettings {
		dedupeSettings(f)
		return len(f)
	}
	if f[3] == h2FrameHeaders && w.wasRefused(binary.BigEndian.Uint32(f[5:])&0x7fffffff) {
		// HEADERS on a stream closed by its reset: a connection error (STREAM_CLOSED) that
		// http2, which took the refused stream for idle, would not see.
		f[3] = h2FrameIgnored
		w.goAway(http2.ErrCodeStreamClosed)
		return len(f)
	}
	at, ok := w.gate.headerBlock(f)
	if !ok && at > 0 && w.gate.opening && w.takeReset(start, length) {
		// The client reset the stream in the same read: http2 is made to refuse it (a
		// stream error, after its HPACK decoder has read the block) rather than start a
		// handler, a route and perhaps an upstream request for a response no one will read.
		ok = true
		w.resetOnArrival()
	}
	if !ok {
		return len(f)
	}
	// End the block with the poison field, before any padding.
	n := len(poisonField)
	if w.w+n > len(w.buf) {
		w.buf = append(w.buf, make([]byte, n)...)
	}
	at += start
	copy(w.buf[at+n:], w.buf[at:w.w])
	copy(w.buf[at:], poisonField[:])
	w.w += n
	length += n
	w.buf[start], w.buf[start+1], w.buf[start+2] = byte(length>>16), byte(length>>8), byte(length)
	return h2FrameHeaderLen + length
}

// headerBlock decodes the block fragment of the whole HEADERS or CONTINUATION frame f. When
// the frame ends a malformed block, it returns where in f the poison field goes.
func (g *frameGate) headerBlock(f []byte) (at int, poison bool) {
	if g.broken {
		return 0, false
	}
	flags := f[4]
	frag, pad := f[h2FrameHeaderLen:], 0
	if f[3] == h2FrameHeaders {
		if flags&h2FlagPadded != 0 {
			if len(frag) == 0 {
				return 0, false // malformed: http2 refuses it
			}
			pad, frag = int(frag[0]), frag[1:]
		}
		if flags&h2FlagPriority != 0 {
			if len(frag) < 5 {
				return 0, false
			}
			frag = frag[5:]
		}
		if pad > len(frag) {
			return 0, false
		}
		frag = frag[:len(frag)-pad]
	}
	if g.dec == nil {
		g.dec = hpack.NewDecoder(decoderTableSize, g.field)
		g.dec.SetMaxStringLength(maxGatedFrame * 4)
	}
	if _, err := g.dec.Write(frag); err != nil {
		g.broken = true
		return 0, false
	}
	if flags&h2FlagEndHeaders == 0 {
		return 0, false
	}
	if err := g.dec.Close(); err != nil {
		g.broken = true
		return 0, false
	}
	poison, g.bad = g.bad, false
	return len(f) - pad, poison
}

// field notes a field of a request header block.
func (g *frameGate) field(f hpack.HeaderField) {
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		g.bad = true
	case "te":
		g.bad = g.bad || f.Value != "trailers"
	}
}

// dedupeSettings gives every parameter of the SETTINGS frame f that a later one repeats an
// identifier no one defines.
func dedupeSettings(f []byte) {
	p := f[h2FrameHeaderLen:]
	if f[4]&h2FlagAck != 0 || len(p)%h2SettingsEntryLen != 0 || len(p)/h2SettingsEntryLen > maxGatedSettings {
		return
	}
	for i := 0; i < len(p); i += h2SettingsEntryLen {
		id := binary.BigEndian.Uint16(p[i:])
		for j := i + h2SettingsEntryLen; j < len(p); j += h2SettingsEntryLen {
			if binary.BigEndian.Uint16(p[j:]) == id {
				binary.BigEndian.PutUint16(p[i:], uint16(unknownSettingIDs+i/h2SettingsEntryLen))
				break
			}
		}
	}
}
