package tlsinspector

import (
	"encoding/binary"
	"errors"
	"strings"
)

// maxClientHello is the largest ClientHello handshake message the TLS inspector reads, as in
// Envoy's tls_inspector (64 KiB).
const maxClientHello = 64 << 10

var (
	// errNeedMore: the bytes so far are a valid prefix of a ClientHello; read more.
	errNeedMore = errors.New("tls inspector: incomplete client hello")
	// errNotTLS: the bytes are not a TLS ClientHello; the connection is raw_buffer.
	errNotTLS = errors.New("tls inspector: not a tls client hello")
	// errHelloTooLarge: the ClientHello is larger than maxClientHello.
	errHelloTooLarge = errors.New("tls inspector: client hello too large")
)

// clientHello is what the TLS inspector learns from a ClientHello.
type clientHello struct {
	serverName string   // server_name extension host name, lower-cased; "" without SNI
	alpn       []string // application_layer_protocol_negotiation names, in client order
}

// parseClientHello reads the TLS records at the start of b and parses the ClientHello they
// carry, which may span several handshake records. It returns errNeedMore while b is a valid
// but incomplete prefix, errNotTLS when b cannot start a ClientHello, and errHelloTooLarge.
func parseClientHello(b []byte) (clientHello, error) {
	var msg []byte // handshake bytes gathered from the records
	for {
		if len(b) == 0 {
			return clientHello{}, errNeedMore
		}
		if b[0] != 0x16 { // content type handshake
			return clientHello{}, errNotTLS
		}
		if len(b) < 2 {
			return clientHello{}, errNeedMore
		}
		if b[1] != 3 { // record version major: SSL 3.0 and every TLS version
			return clientHello{}, errNotTLS
		}
		if len(b) < 5 {
			return clientHello{}, errNeedMore
		}
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if n == 0 || n > 1<<14+2048 {
			return clientHello{}, errNotTLS
		}
		// The handshake header says how long the message is; check it as soon as it is seen.
		avail := b[5:]
		if len(avail) > n {
			avail = avail[:n]
		}
		if len(msg) < 4 && len(msg)+len(avail) >= 4 {
			var hdr [4]byte
			k := copy(hdr[:], msg)
			copy(hdr[k:], avail)
			if hdr[0] != 1 { // handshake type client_hello
				return clientHello{}, errNotTLS
			}
			if int(hdr[1])<<16|int(hdr[2])<<8|int(hdr[3]) > maxClientHello {
				return clientHello{}, errHelloTooLarge
			}
		}
		if len(b) < 5+n {
			return clientHello{}, errNeedMore
		}
		msg = append(msg, b[5:5+n]...)
		b = b[5+n:]
		if len(msg) >= 4 {
			size := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
			if len(msg) >= 4+size {
				return parseHelloBody(msg[4 : 4+size])
			}
		}
	}
}

// parseHelloBody parses a ClientHello body (after the handshake header).
func parseHelloBody(body []byte) (clientHello, error) {
	r := reader(body)
	var out clientHello
	if !r.skip(2+32) || !r.skipVector(1) || !r.skipVector(2) || !r.skipVector(1) {
		return out, errNotTLS
	}
	if len(r) == 0 {
		return out, nil // no extensions
	}
	exts, ok := r.vector(2)
	if !ok {
		return out, errNotTLS
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vector(2)
		if !ok1 || !ok2 {
			return out, errNotTLS
		}
		var err error
		switch typ {
		case 0: // server_name
			out.serverName, err = parseServerName(data)
		case 16: // application_layer_protocol_negotiation
			out.alpn, err = parseALPN(data)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func parseServerName(data reader) (string, error) {
	list, ok := data.vector(2)
	if !ok || len(data) != 0 {
		return "", errNotTLS
	}
	for len(list) > 0 {
		typ, ok1 := list.u8()
		name, ok2 := list.vector(2)
		if !ok1 || !ok2 {
			return "", errNotTLS
		}
		if typ == 0 { // host_name
			return strings.ToLower(string(name)), nil
		}
	}
	return "", nil
}

func parseALPN(data reader) ([]string, error) {
	list, ok := data.vector(2)
	if !ok || len(data) != 0 {
		return nil, errNotTLS
	}
	var out []string
	for len(list) > 0 {
		p, ok := list.vector(1)
		if !ok || len(p) == 0 {
			return nil, errNotTLS
		}
		out = append(out, string(p))
	}
	return out, nil
}

// reader consumes big-endian TLS wire fields from the front of a byte slice.
type reader []byte

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) u8() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := (*r)[0]
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*r)
	*r = (*r)[2:]
	return v, true
}

// vector reads a vector whose length prefix is lenBytes (1 or 2) long.
func (r *reader) vector(lenBytes int) (reader, bool) {
	var n int
	if lenBytes == 1 {
		v, ok := r.u8()
		if !ok {
			return nil, false
		}
		n = int(v)
	} else {
		v, ok := r.u16()
		if !ok {
			return nil, false
		}
		n = int(v)
	}
	if len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) skipVector(lenBytes int) bool {
	_, ok := r.vector(lenBytes)
	return ok
}
