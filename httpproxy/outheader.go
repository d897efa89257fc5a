package httpproxy

import (
	"net/http"

	"github.com/legateproxy/legate/pool"
)

// outHeader is the upstream request's header, which the router builds from the inbound one
// without changing it (access logs, filters, retries and mirrors see the inbound request as
// it came). Copying the inbound map for every request cost about 5,000 instructions, so the
// header is at first the inbound map seen through the router's few edits (names set or
// removed); it becomes a map of its own (whole) only for a consumer that needs one: the
// route's header mutations, an upstream span's context, an upgrade, the access log.
type outHeader struct {
	in    http.Header  // the inbound request's header, read only
	edits []headerEdit // the router's edits while not whole, one per name
	full  http.Header  // the whole header once whole: the stream's own map
	whole bool
}

// headerEdit is a name the router set (vals) or removed (vals nil).
type headerEdit struct {
	key  string
	vals []string
}

// reset starts the upstream header as the inbound header in.
func (o *outHeader) reset(in http.Header) {
	o.release()
	o.in = in
}

// release forgets the request's header and edits (the stream goes back to its pool).
func (o *outHeader) release() {
	if o.whole {
		clear(o.full)
		o.whole = false
	}
	clear(o.edits)
	o.edits = o.edits[:0]
	o.in = nil
}

// edit returns the index of key's edit, or -1.
func (o *outHeader) edit(key string) int {
	for i := range o.edits {
		if o.edits[i].key == key {
			return i
		}
	}
	return -1
}

// get returns key's values in the upstream header (key canonical).
func (o *outHeader) get(key string) []string {
	if o.whole {
		return o.full[key]
	}
	if i := o.edit(key); i >= 0 {
		return o.edits[i].vals
	}
	return o.in[key]
}

// set replaces key's values (key canonical; vals not nil).
func (o *outHeader) set(key string, vals []string) {
	if o.whole {
		o.full[key] = vals
		return
	}
	if i := o.edit(key); i >= 0 {
		o.edits[i].vals = vals
		return
	}
	o.edits = append(o.edits, headerEdit{key, vals})
}

// del removes key (canonical).
func (o *outHeader) del(key string) {
	switch {
	case o.whole:
		delete(o.full, key)
	case o.edit(key) >= 0 || o.in[key] != nil:
		o.set(key, nil)
	}
}

// header returns the upstream header as a map of the stream's own, which the caller may
// change: the inbound values are shared with their capacity clipped, so that appending to
// one copies it. From then on the map is the upstream header.
func (o *outHeader) header() http.Header {
	if o.whole {
		return o.full
	}
	for k, vs := range o.in {
		o.full[k] = vs[:len(vs):len(vs)]
	}
	for _, e := range o.edits {
		if e.vals == nil {
			delete(o.full, e.key)
		} else {
			o.full[e.key] = e.vals
		}
	}
	clear(o.edits)
	o.edits = o.edits[:0]
	o.whole = true
	return o.full
}

// appendFields appends the upstream header's fields to dst.
func (o *outHeader) appendFields(dst []pool.Field) []pool.Field {
	if o.whole {
		return pool.AppendHTTPHeader(dst, o.full)
	}
	for k, vs := range o.in {
		if len(o.edits) > 0 && o.edit(k) >= 0 {
			continue
		}
		for _, v := range vs {
			dst = append(dst, pool.Field{Name: k, Value: v})
		}
	}
	for _, e := range o.edits {
		for _, v := range e.vals {
			dst = append(dst, pool.Field{Name: e.key, Value: v})
		}
	}
	return dst
}

// setOut sets a header of the upstream request with one value, kept in the stream's value
// storage.
func (s *stream) setOut(key, value string) {
	s.vals = append(s.vals, value)
	n := len(s.vals)
	s.out.set(key, s.vals[n-1:n:n])
}
