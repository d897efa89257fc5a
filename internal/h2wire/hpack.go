// Package h2wire holds what both of Legate's HTTP/2 ends (the downstream server in httpproxy,
// the upstream client in internal/h2client) write the same way: HPACK header fields without a
// dynamic table.
//
// Fields are written without indexing: Legate keeps no HPACK dynamic table for what it sends,
// so no header string outlives the message that lent it (callers reuse the memory behind
// them), nothing is allocated, encoding is a copy, and the peer's decoder does no table work.
// The cost is a few bytes a field; nginx makes the same trade for its responses and its gRPC
// proxy.
package h2wire

import "encoding/binary"

// HPACK static table indexes (RFC 7541 appendix A) used by both ends.
const (
	IdxAuthority  = 1
	IdxMethod     = 2 // ":method: GET"
	IdxMethodPOST = 3
	IdxPath       = 4 // ":path: /"
	IdxSchemeHTTP = 6
	IdxSchemeTLS  = 7
	IdxStatus     = 8 // ":status: 200"
	IdxContentLen = 28
)

// TableSizeZero is a dynamic table size update to 0 (RFC 7541 §6.3): what an encoder that
// keeps no table sends at the start of the first block after the peer changed
// SETTINGS_HEADER_TABLE_SIZE, which some decoders (nghttp2) require.
const TableSizeZero = 0x20

// AppendIndexed appends an indexed field (RFC 7541 §6.1).
func AppendIndexed(b []byte, idx uint64) []byte {
	return AppendInt(b, 7, 0x80, idx)
}

// AppendIndexedName appends a literal field without indexing whose name is a static table
// entry (RFC 7541 §6.2.2).
func AppendIndexedName(b []byte, idx uint64, value string) []byte {
	b = AppendInt(b, 4, 0, idx)
	return AppendString(b, value)
}

// AppendLiteral appends a literal field without indexing with a literal name, written in lower
// case (RFC 7541 §6.2.2).
func AppendLiteral(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = AppendInt(b, 7, 0, uint64(len(name)))
	b = append(b, name...)
	lowerASCII(b[len(b)-len(name):]) // copied whole, then lowered in place
	return AppendString(b, value)
}

// lowerASCII lowers A-Z in b in place, eight bytes at a time: each byte's low seven bits plus
// 0x3f carry into its top bit from 'A' up, plus 0x25 from 'Z'+1 up, and neither carries into
// the next byte; a byte with its own top bit set is left as it is. Byte by byte, lowering
// x-envoy-upstream-service-time cost about 200 instructions a response.
func lowerASCII(b []byte) {
	const ones = 0x0101010101010101
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		h := x & (0x7f * ones)
		upper := (h + 0x3f*ones) &^ (h + 0x25*ones) &^ x & (0x80 * ones)
		binary.LittleEndian.PutUint64(b, x|upper>>2)
		b = b[8:]
	}
	for i, c := range b {
		if c-'A' < 26 {
			b[i] = c + 'a' - 'A'
		}
	}
}

// AppendString appends a string literal without Huffman coding.
func AppendString(b []byte, s string) []byte {
	b = AppendInt(b, 7, 0, uint64(len(s)))
	return append(b, s...)
}

// AppendInt appends an HPACK integer with an n-bit prefix; first holds the bits above it.
func AppendInt(b []byte, n uint, first byte, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(limit))
	v -= limit
	for v >= 128 {
		b = append(b, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(b, byte(v))
}

// staticStatus are the codes of the static table's :status entries, indexes 8 to 14.
var staticStatus = [...]int{200, 204, 206, 304, 400, 404, 500}

// AppendStatus appends a response's :status field: the static table's entry for the usual
// codes, else its name with the code as a literal.
func AppendStatus(b []byte, code int) []byte {
	for i, c := range staticStatus {
		if c == code {
			return AppendIndexed(b, IdxStatus+uint64(i))
		}
	}
	if code < 100 || code > 999 {
		code = 500 // net/http's WriteHeader refuses such codes; never sent as they are
	}
	b = AppendInt(b, 4, 0, IdxStatus)
	return append(b, 3, byte('0'+code/100), byte('0'+code/10%10), byte('0'+code%10))
}

// StaticName is the static table index of a response field's name in canonical form
// ("Content-Type"), or 0: such a name is written as its index instead of its letters.
func StaticName(canonical string) uint64 {
	switch canonical {
	case "Accept-Ranges":
		return 18
	case "Access-Control-Allow-Origin":
		return 20
	case "Age":
		return 21
	case "Allow":
		return 22
	case "Cache-Control":
		return 24
	case "Content-Disposition":
		return 25
	case "Content-Encoding":
		return 26
	case "Content-Language":
		return 27
	case "Content-Length":
		return 28
	case "Content-Location":
		return 29
	case "Content-Range":
		return 30
	case "Content-Type":
		return 31
	case "Date":
		return 33
	case "Etag":
		return 34
	case "Expires":
		return 36
	case "Last-Modified":
		return 44
	case "Link":
		return 45
	case "Location":
		return 46
	case "Retry-After":
		return 53
	case "Server":
		return 54
	case "Set-Cookie":
		return 55
	case "Strict-Transport-Security":
		return 56
	case "Vary":
		return 59
	case "Via":
		return 60
	case "Www-Authenticate":
		return 61
	}
	return 0
}
