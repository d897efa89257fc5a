package tlstest

import (
	"encoding/binary"
	"net"
)

// RecordCounter is a socket that counts the TLS records its peer sends: each record's
// 5-byte header carries the length of its body, and the bytes pass through unchanged. Wrap
// a client's connection in one to see how a server frames what it writes. It belongs to the
// goroutine that reads it.
type RecordCounter struct {
	net.Conn
	hdr     [5]byte
	have    int // header bytes of the current record seen so far
	left    int // body bytes of the current record still to come
	records int
}

// Records returns how many records have begun arriving.
func (c *RecordCounter) Records() int { return c.records }

// Read reads from the socket and counts the records it passes.
func (c *RecordCounter) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	return n, err
}

func (c *RecordCounter) scan(b []byte) {
	for len(b) > 0 {
		if c.left > 0 {
			k := min(c.left, len(b))
			c.left -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.have:], b)
		c.have += k
		b = b[k:]
		if c.have == len(c.hdr) {
			c.records++
			c.left = int(binary.BigEndian.Uint16(c.hdr[3:]))
			c.have = 0
		}
	}
}
