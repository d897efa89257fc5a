package rds

import (
	"fmt"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/headermatch"
)

// keyFragment is one scope_key_builder fragment: one element of a header's value, chosen by
// position (index) or by key (element).
type keyFragment struct {
	header string // canonical MIME form, or a pseudo-header
	sep    string // element_separator (default ",")
	index  int    // the element's position, unless byKey
	byKey  bool
	key    string // element.key: the element "key<kvSep>value" whose value is the fragment
	kvSep  string // element.separator
}

// KeyBuilder builds a request's scope key from its headers (Envoy's ScopeKeyBuilder): the
// key ScopeKey gives the scope the request belongs to.
type KeyBuilder []keyFragment

// NewKeyBuilder compiles a connection manager's scoped_routes.scope_key_builder; path names
// it in errors.
func NewKeyBuilder(path string, b *hcmv3.ScopedRoutes_ScopeKeyBuilder) (KeyBuilder, error) {
	var out KeyBuilder
	for i, f := range b.GetFragments() {
		hv := f.GetHeaderValueExtractor()
		if hv == nil {
			return nil, fmt.Errorf("%s.fragments[%d]: only header_value_extractor is supported", path, i)
		}
		kf := keyFragment{header: hv.GetName(), sep: hv.GetElementSeparator()}
		kf.header = headermatch.Key(kf.header) // "host" is :authority, as everywhere
		if kf.sep == "" {
			kf.sep = ","
		}
		switch t := hv.GetExtractType().(type) {
		case *hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index:
			kf.index = int(t.Index)
		case *hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Element:
			kf.byKey, kf.key, kf.kvSep = true, t.Element.GetKey(), t.Element.GetSeparator()
		}
		out = append(out, kf)
	}
	return out, nil
}

// Key returns the request's scope key (fragments joined with NUL, as ScopeKey joins a
// scope's), false when a fragment cannot be extracted. It allocates only for keys of more
// than one fragment.
func (b KeyBuilder) Key(req *route.Request) (string, bool) {
	if len(b) == 1 {
		return b[0].extract(req)
	}
	var sb strings.Builder
	for i, f := range b {
		v, ok := f.extract(req)
		if !ok {
			return "", false
		}
		if i > 0 {
			sb.WriteByte(0)
		}
		sb.WriteString(v)
	}
	return sb.String(), true
}

func (f *keyFragment) extract(req *route.Request) (string, bool) {
	var v string
	switch f.header {
	case ":authority":
		v = req.Authority
	case ":path":
		v = req.Path
	case ":method":
		v = req.Method
	default:
		vs := req.Headers()[f.header]
		if len(vs) == 0 {
			return "", false
		}
		v = vs[0]
	}
	if f.byKey {
		for rest := v; ; {
			elem, tail, more := strings.Cut(rest, f.sep)
			if k, val, ok := strings.Cut(elem, f.kvSep); ok && k == f.key {
				return val, true
			}
			if !more {
				return "", false
			}
			rest = tail
		}
	}
	for i, rest := 0, v; ; i++ {
		elem, tail, more := strings.Cut(rest, f.sep)
		if i == f.index {
			return elem, true
		}
		if !more {
			return "", false
		}
		rest = tail
	}
}
