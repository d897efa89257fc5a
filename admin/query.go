package admin

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Query holds admin request parameters parsed by Envoy's rules: pieces split
// on '&', each at its first '=', "%XX" decoded and '+' left alone, repeated
// keys kept in order. It is the same type the handlers of every family read.
type Query map[string][]string

// ParseQuery parses a raw query string (without the leading '?').
func ParseQuery(raw string) Query {
	q := Query{}
	if raw == "" {
		return q
	}
	for _, piece := range strings.Split(raw, "&") {
		if piece == "" {
			continue
		}
		key, value, _ := strings.Cut(piece, "=")
		key, value = percentDecode(key), percentDecode(value)
		q[key] = append(q[key], value)
	}
	return q
}

// percentDecode decodes %XX escapes only. A '%' not followed by two hex
// digits is kept as is, as Envoy does; '+' is not a space.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Has reports whether key is present, whatever its value. Envoy's boolean
// parameters (usedonly, include_eds, graceful, …) are true when present.
func (q Query) Has(key string) bool {
	_, ok := q[key]
	return ok
}

// Get returns the first value of key, or "".
func (q Query) Get(key string) string {
	if v := q[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// NonEmpty returns the first value of key and whether it is present and not
// empty: Envoy treats `?format=` as if format were absent.
func (q Query) NonEmpty(key string) (string, bool) {
	v := q.Get(key)
	return v, v != ""
}

// MaxRequestBytes bounds an admin request's query string and body. A
// request over it is refused whole (413) rather than cut, so that
// /runtime_modify never applies part of what was sent.
const MaxRequestBytes = 1 << 20

// errTooLarge says which part of a request went over MaxRequestBytes.
type errTooLarge string

func (e errTooLarge) Error() string {
	return "admin request " + string(e) + " exceeds the limit of " + strconv.Itoa(MaxRequestBytes) + " bytes"
}

// requestQuery returns the parameters of r: the URL's, or, when the URL has
// none and the endpoint allows it, those of an
// application/x-www-form-urlencoded body.
func requestQuery(r *http.Request, formBody bool) (Query, error) {
	if len(r.URL.RawQuery) > MaxRequestBytes {
		return nil, errTooLarge("query")
	}
	q := ParseQuery(r.URL.RawQuery)
	if len(q) > 0 || !formBody || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.Body == nil {
		return q, nil
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return ParseQuery(string(body)), nil
}

// readBody reads r's whole body, or fails with errTooLarge when it is longer
// than MaxRequestBytes (announced or not).
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxRequestBytes {
		return nil, errTooLarge("body")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > MaxRequestBytes {
		return nil, errTooLarge("body")
	}
	return body, nil
}

// refuseTooLarge answers 413 with the reason when err is errTooLarge, and
// reports whether it did.
func refuseTooLarge(w http.ResponseWriter, err error) bool {
	var tl errTooLarge
	if !errors.As(err, &tl) {
		return false
	}
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	io.WriteString(w, tl.Error())
	return true
}
