package lua

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// headerMap is a header map object: a call's headers (trailers false), whose
// pseudo-headers are the request's fields or the response's status, or the trailers
// trailers() gave, which have no pseudo-headers.
type headerMap struct {
	c        *call
	h        http.Header
	trailers bool
}

// headersArg returns the header map object at 1, of a live call, and the header name at 2
// in lower case.
// The response's headers stay the script's after body(): they are held until it ends.
func headersArg(L *glua.LState) (*headerMap, string) {
	return headerMapArg(L), lowerASCII(L.CheckString(2))
}

func headerMapArg(L *glua.LState) *headerMap {
	m, _ := L.CheckUserData(1).Value.(*headerMap)
	if m == nil {
		L.RaiseError("not a header map")
	}
	checkLive(L, m.c)
	return m
}

// luaString copies a header string for a script: on an HTTP/1 connection the connection
// manager's header and trailer strings live in a buffer it reuses for the next request, and
// a script may keep what it read in a global.
func luaString(s string) glua.LString { return glua.LString(strings.Clone(s)) }

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// pseudo returns a pointer to the request field a pseudo-header names, or nil.
func (c *call) pseudo(name string) *string {
	if c.response {
		return nil
	}
	r := c.x.Request
	switch name {
	case ":path":
		return &r.Path
	case ":method":
		return &r.Method
	case ":authority":
		return &r.Authority
	case ":scheme":
		return &r.Scheme
	}
	return nil
}

// values returns the values of a header; pseudo-headers read the request's fields and the
// response's status.
func (m *headerMap) values(name string) []string {
	if m.trailers {
		return m.h[http.CanonicalHeaderKey(name)]
	}
	c := m.c
	if p := c.pseudo(name); p != nil {
		if *p == "" {
			return nil
		}
		return []string{*p}
	}
	if c.response && name == ":status" {
		return []string{strconv.Itoa(c.x.Status)}
	}
	return m.h[http.CanonicalHeaderKey(name)]
}

// set replaces a header's values (add false) or appends one (add true).
func (m *headerMap) set(L *glua.LState, name, value string, add bool) {
	if !m.trailers && m.setPseudo(L, name, value) {
		return
	}
	if name == "" || name[0] == ':' {
		L.RaiseError("headers: changing %q is not implemented by Legate", name)
	}
	key := http.CanonicalHeaderKey(name)
	if add {
		m.h[key] = append(m.h[key], value)
		return
	}
	m.h[key] = []string{value}
}

// setPseudo sets a request pseudo-header or the response's :status, reporting whether name
// is one.
func (m *headerMap) setPseudo(L *glua.LState, name, value string) bool {
	c := m.c
	if p := c.pseudo(name); p != nil {
		*p = value
		return true
	}
	if c.response && name == ":status" {
		c.setStatus(L, value)
		return true
	}
	return false
}

// setStatus changes the response's status (filter.Exchange.Status, which the connection
// manager sends): a three-digit code from 100 to 999, as Envoy's codec accepts.
func (c *call) setStatus(L *glua.LState, value string) {
	n, err := strconv.Atoi(value)
	if err != nil || n < 100 || n > 999 {
		L.RaiseError("headers: :status %q is not a status code (100 to 999)", value)
	}
	c.x.Status = n
}

var headerMethods = map[string]glua.LGFunction{
	// get joins several values with ",", as Envoy's.
	"get": func(L *glua.LState) int {
		m, name := headersArg(L)
		switch vs := m.values(name); len(vs) {
		case 0:
			L.Push(glua.LNil)
		case 1:
			L.Push(luaString(vs[0]))
		default:
			L.Push(glua.LString(strings.Join(vs, ",")))
		}
		return 1
	},
	"getAtIndex": func(L *glua.LState) int {
		m, name := headersArg(L)
		vs, i := m.values(name), L.CheckInt(3)
		if i < 0 || i >= len(vs) {
			L.Push(glua.LNil)
			return 1
		}
		L.Push(luaString(vs[i]))
		return 1
	},
	"getNumValues": func(L *glua.LState) int {
		m, name := headersArg(L)
		L.Push(glua.LNumber(len(m.values(name))))
		return 1
	},
	"add": func(L *glua.LState) int {
		m, name := headersArg(L)
		m.set(L, name, L.CheckString(3), true)
		return 0
	},
	"replace": func(L *glua.LState) int {
		m, name := headersArg(L)
		m.set(L, name, L.CheckString(3), false)
		return 0
	},
	"remove": func(L *glua.LState) int {
		m, name := headersArg(L)
		if name != "" && name[0] == ':' {
			L.RaiseError("headers: removing %q is not implemented by Legate", name)
		}
		delete(m.h, http.CanonicalHeaderKey(name))
		return 0
	},
}

// headersPairs iterates over (name, value) pairs, names in lower case: the request's
// pseudo-headers (or the response's :status) first, then the headers by name, a header of
// several values once per value.
func headersPairs(L *glua.LState) int {
	m := headerMapArg(L)
	c := m.c
	type kv struct{ k, v string }
	var all []kv
	switch {
	case m.trailers:
	case c.response:
		all = append(all, kv{":status", strconv.Itoa(c.x.Status)})
	default:
		for _, p := range [...]string{":authority", ":path", ":method", ":scheme"} {
			if v := *c.pseudo(p); v != "" {
				all = append(all, kv{p, v})
			}
		}
	}
	names := make([]string, 0, len(m.h))
	for k := range m.h {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range m.h[k] {
			all = append(all, kv{strings.ToLower(k), v})
		}
	}
	L.Push(iterator(L, len(all), func(i int) (glua.LValue, glua.LValue) {
		return luaString(all[i].k), luaString(all[i].v)
	}))
	L.Push(glua.LNil)
	L.Push(glua.LNil)
	return 3
}
