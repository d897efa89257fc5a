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
	in   http.Header // the inbound request's header, read only
	idx  *inIndex    // in's index, which answers for in while in is not filled (lazy)
	vals *[]string   // the stream's value storage, for idx's answers
	keys nameBits    // the names in and edits may hold (allNames once whole): get's filter
	// inKeys and edited are the bits of in's names (idx.keys) and of the edits' alone: where
	// they share none, no edit names a field of list.
	inKeys, edited nameBits
	exact          bool // list holds in's fields (inIndex)
	list           []pool.Field
	edits          []headerEdit // the router's edits while not whole, one per name
	full           http.Header  // the whole header once whole: the stream's own map
	whole          bool
}

// headerEdit is a name the router set (vals) or removed (vals nil).
type headerEdit struct {
	key  string
	vals []string
}

// reset starts the upstream header as the inbound header in, which idx indexes; vals is the
// stream's value storage.
func (o *outHeader) reset(in http.Header, idx *inIndex, vals *[]string) {
	if o.whole || len(o.edits) > 0 { // else putStream released it, as it does every request
		o.release()
	}
	o.in, o.idx, o.vals = in, idx, vals
	o.keys, o.inKeys, o.edited, o.exact, o.list = idx.keys, idx.keys, 0, idx.exact, idx.fields
}

// release forgets the request's header and edits (the stream goes back to its pool).
func (o *outHeader) release() {
	if o.whole {
		clear(o.full)
		o.whole = false
	}
	// Edit by edit rather than clear: the runtime's clearing of memory with pointers was
	// about 50 instructions for the one or two edits of a request.
	for i := range o.edits {
		o.edits[i].key, o.edits[i].vals = "", nil
	}
	o.edits = o.edits[:0]
	o.in, o.idx, o.vals, o.list, o.exact = nil, nil, nil, nil, false
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
func (o *outHeader) get(key string) []string { return o.getKey(lookupKey{key, nameBit(key)}) }

// getKey is get for a key whose bit is known: where neither the inbound header nor an edit
// may hold it, the filter alone answers, inlined (the router's four lookups of names a
// request rarely has, x-envoy-upstream-rq-timeout-ms, x-envoy-retry-on, x-envoy-max-retries
// and content-type, were about 100 instructions each through the edits and the filter).
func (o *outHeader) getKey(k lookupKey) []string {
	if o.keys&k.bit == 0 {
		return nil
	}
	return o.lookup(k.name)
}

// lookup is get past the filter.
func (o *outHeader) lookup(key string) []string {
	if o.whole {
		return o.full[key]
	}
	if i := o.edit(key); i >= 0 {
		return o.edits[i].vals
	}
	return o.inbound(key)
}

// inbound returns key's values in the inbound header.
func (o *outHeader) inbound(key string) []string {
	switch {
	case !o.keys.mayHave(key):
		return nil
	case o.idx.lazy:
		return o.idx.values(key, o.vals)
	}
	return o.in[key]
}

// set replaces key's values (key canonical; vals not nil).
func (o *outHeader) set(key string, vals []string) { o.setKey(lookupKey{key, nameBit(key)}, vals) }

// setKey is set for a key whose bit is known.
func (o *outHeader) setKey(k lookupKey, vals []string) {
	if o.whole {
		o.full[k.name] = vals
		return
	}
	if i := o.edit(k.name); i >= 0 {
		o.edits[i].vals = vals
		return
	}
	o.edits = append(o.edits, headerEdit{k.name, vals})
	o.keys |= k.bit
	o.edited |= k.bit
}

// del removes key (canonical).
func (o *outHeader) del(key string) {
	switch {
	case o.whole:
		delete(o.full, key)
	case o.edit(key) >= 0 || o.inbound(key) != nil:
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
	o.idx.fill(o.in, o.vals)
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
	o.whole, o.keys = true, allNames
	return o.full
}

// appendFields appends the upstream header's fields to dst.
func (o *outHeader) appendFields(dst []pool.Field) []pool.Field {
	if o.whole {
		return pool.AppendHTTPHeader(dst, o.full)
	}
	if o.exact {
		// The fields as they arrived, in their order: ranging over the map cost about 450
		// instructions of a proxied request, and lost the order. When no edit names any of
		// them (the router's own names, x-envoy-expected-rq-timeout-ms, are not the
		// client's), they are copied at once: field by field, each compared with the edits,
		// was about 30 instructions a field.
		if o.edited&o.inKeys == 0 {
			dst = append(dst, o.list...)
		} else {
			for _, f := range o.list {
				if o.edit(f.Name) < 0 {
					dst = append(dst, f)
				}
			}
		}
	} else {
		for k, vs := range o.in {
			if len(o.edits) > 0 && o.edit(k) >= 0 {
				continue
			}
			for _, v := range vs {
				dst = append(dst, pool.Field{Name: k, Value: v})
			}
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
func (s *stream) setOut(key, value string) { s.setOutKey(lookupKey{key, nameBit(key)}, value) }

// setOutKey is setOut for a key whose bit is known.
func (s *stream) setOutKey(k lookupKey, value string) {
	s.vals = append(s.vals, value)
	n := len(s.vals)
	s.out.setKey(k, s.vals[n-1:n:n])
}

// inIndex indexes an HTTP/1 request's header as it arrived, beside its map (the map stays
// the interface of filters, routes and logs):
//   - keys, a filter of the names the map may hold (nameBits);
//   - fields, the fields in the order they arrived, while exact: the map holds exactly them
//     (no value was replaced or removed since), so that the upstream request is written from
//     them (outHeader.appendFields);
//   - lazy: the map is not filled yet, and fields stand for it (exact). Filling the map cost
//     about 700 instructions of a proxied request (a clear, an assignment per field, each
//     hashing its name) that most requests, routed and forwarded without a header being
//     looked up by name, never read: fill fills it for the first reader that needs the map
//     (filters, tracing, logs, the route table through route.Request.Fill), and values
//     answers the connection manager's and the router's lookups of single names from fields.
//
// The connection manager keeps both true through its own changes (add, changed); once
// filters or tracing have had the map, the index is loose: every lookup goes to the map, and
// the upstream request is written from it. An HTTP/2 request's index is not lazy (the map is
// filled), its keys and fields what h2conn.newRequest listed (h2stream.list), exact unless
// the request has a Trailer field.
type inIndex struct {
	keys   nameBits
	fields []pool.Field
	exact  bool
	lazy   bool
}

// reset starts the index of a header that is still empty, and not filled until fill.
func (x *inIndex) reset() { x.keys, x.fields, x.exact, x.lazy = 0, x.fields[:0], true, true }

// loose gives up the index: the map may have changed in ways it does not know. The map must
// be filled.
func (x *inIndex) loose() { x.keys, x.exact = allNames, false }

// changed notes that values were replaced or removed in the map: fields no longer match it.
// The map must be filled.
func (x *inIndex) changed() { x.exact = false }

// fill fills h, the header the index stands for while lazy, from fields (vals: the value
// storage): as parseHead would have, name by name in their order.
func (x *inIndex) fill(h http.Header, vals *[]string) {
	if !x.lazy {
		return
	}
	x.lazy = false
	for _, f := range x.fields {
		addValue(h, vals, f.Name, f.Value)
	}
}

// values returns key's values (key canonical) as the filled map would hold them, from
// fields while lazy; the slice is kept in vals.
func (x *inIndex) values(key string, vals *[]string) []string {
	start := len(*vals)
	for i := range x.fields {
		if x.fields[i].Name == key {
			*vals = append(*vals, x.fields[i].Value)
		}
	}
	if n := len(*vals); n > start {
		return (*vals)[start:n:n]
	}
	return nil
}

// add notes that value was added under key (canonical), which the caller adds to the map
// unless lazy.
func (x *inIndex) add(key, value string) { x.addKey(lookupKey{key, nameBit(key)}, value) }

// addKey is add for a key whose bit is known.
func (x *inIndex) addKey(k lookupKey, value string) {
	x.keys |= k.bit
	if x.exact {
		x.fields = append(x.fields, pool.Field{Name: k.name, Value: value})
	}
}

// nameBits is a one-word filter of the names an inbound request header holds (canonical keys),
// one bit per name by a hash of its length and three of its bytes. The connection manager looks
// up several headers a request rarely has (x-forwarded-for, x-forwarded-proto, x-request-id,
// the x-envoy-* overrides, content-type on a GET): where the name's bit is clear the header is
// not there, which saves the map lookup, about 145 instructions each, seven times a proxied
// request. A set bit only sends the lookup to the map. inIndex keeps it.
type nameBits uint64

// allNames is the filter that may hold every name.
const allNames = ^nameBits(0)

// nameBit is key's bit. Its bytes are the second, the middle and the last one: with the
// second and the last alone, the x-envoy-* names (second byte '-') shared bits with the
// names a request carries (x-envoy-max-retries with x-request-id,
// x-envoy-upstream-rq-timeout-ms with x-envoy-expected-rq-timeout-ms), and their lookups
// went past the filter.
func nameBit(key string) nameBits {
	n := uint(len(key))
	if n < 2 {
		return 1
	}
	return 1 << ((n*7 + uint(key[1]|0x20) + uint(key[n-1]|0x20)*3 + uint(key[n/2]|0x20)*7) & 63)
}

// mayHave reports whether key may be in the header b covers.
func (b nameBits) mayHave(key string) bool { return b&nameBit(key) != 0 }

// lookupKey is a canonical header name with its bit (nameBit). The names the connection
// manager and the router look up or set on every request have theirs computed once
// (lookupKeys): with it, a lookup of a name the request does not have is a test of the bit,
// inlined (computing the bit and calling the lookup was about 40 instructions).
type lookupKey struct {
	name string
	bit  nameBits
}

// lookupKeys are the names looked up or set on every request, with their bits.
var lookupKeys = struct {
	xff, xfProto, requestID, contentType, upstreamTimeout, expectedTimeout, retryOn, maxRetries lookupKey
}{
	xff: newLookupKey(hdrXFF), xfProto: newLookupKey(hdrXFProto), requestID: newLookupKey(hdrRequestID),
	contentType: newLookupKey(hdrContentType), upstreamTimeout: newLookupKey(hdrUpstreamTimeout),
	expectedTimeout: newLookupKey(hdrExpectedTimeout), retryOn: newLookupKey(hdrRetryOn),
	maxRetries: newLookupKey(hdrMaxRetries),
}

func newLookupKey(key string) lookupKey { return lookupKey{key, nameBit(key)} }
