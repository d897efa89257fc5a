package compressor

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// headerStat is what the accept-encoding decision says of the request's header.
type headerStat uint8

const (
	notValid        headerStat = iota // no acceptable encoding, or q=0 for all
	identity                          // identity preferred
	wildcard                          // "*" preferred: the first filter's encoding
	validCompressor                   // a filter's encoding preferred
)

// decision is the encoding chosen for a stream's response, once, for every compressor filter
// of the chain (Envoy's EncodingDecision).
type decision struct {
	encoding string
	stat     headerStat
}

// acceptAllowed reports whether this filter is the one to compress the response, deciding the
// chain's choice on first use, and counts what the request's accept-encoding said.
func (f *Filter) acceptAllowed(x *filter.Exchange, c *chain, h http.Header, lib *library) bool {
	if !c.hasAccept {
		f.resp.NoAcceptHeader.Inc()
		return false
	}
	if !c.decided {
		c.decided = true
		c.choice = choose(c.accept, c.encodings(x, h))
	}
	use := strings.EqualFold(lib.encoding, c.choice.encoding)
	switch c.choice.stat {
	case validCompressor:
		if use {
			f.resp.HeaderCompressorUsed.Inc()
		} else {
			f.resp.HeaderCompressorOvershadowed.Inc()
		}
	case identity:
		f.resp.HeaderIdentity.Inc()
	case wildcard:
		f.resp.HeaderWildcard.Inc()
	default:
		f.resp.HeaderNotValid.Inc()
	}
	return use
}

// encodings are the encodings the chain's filters would produce for a response of this
// content type, in chain order, each once.
func (c *chain) encodings(x *filter.Exchange, h http.Header) []string {
	var out []string
	for _, f := range c.filters {
		if !f.cfg.response.typeAllowed(h) {
			continue
		}
		enc := f.lib(f.perRoute(x)).encoding
		if !slices.Contains(out, enc) {
			out = append(out, enc)
		}
	}
	return out
}

// choose picks the response's encoding from accept (the request's accept-encoding) among
// allowed, in the order the filters offer them: the acceptable coding with the highest
// q-value; "*" stands for the first allowed one; a coding with q=0 is never chosen, even
// through "*". Tokens whose q-value does not parse are skipped.
func choose(accept string, allowed []string) decision {
	type pair struct {
		coding string
		q      float64
	}
	var pairs []pair
	for _, tok := range strings.Split(accept, ",") {
		if strings.TrimSpace(tok) == "" {
			continue
		}
		coding, params, hasParams := strings.Cut(tok, ";")
		p := pair{coding: strings.TrimSpace(coding), q: 1}
		if hasParams {
			if name, v, ok := strings.Cut(params, "="); ok && strings.EqualFold(strings.TrimSpace(name), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					continue
				}
				p.q = q
			}
		}
		pairs = append(pairs, p)
		if p.q == 0 {
			allowed = slices.DeleteFunc(slices.Clone(allowed), func(e string) bool { return e == p.coding })
		}
	}
	if len(pairs) == 0 || len(allowed) == 0 {
		return decision{encoding: "identity", stat: notValid}
	}
	best := pair{coding: "identity"}
	for _, p := range pairs {
		if p.q > best.q && (slices.Contains(allowed, p.coding) || p.coding == "identity" || p.coding == "*") {
			best = p
		}
	}
	switch {
	case best.q == 0:
		return decision{encoding: "identity", stat: notValid}
	case best.coding == "identity":
		return decision{encoding: "identity", stat: identity}
	case best.coding == "*":
		return decision{encoding: allowed[0], stat: wildcard}
	}
	return decision{encoding: best.coding, stat: validCompressor}
}
