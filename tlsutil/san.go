package tlsutil

import (
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/legateproxy/legate/internal/headermatch"
)

// SANType is the kind of subject alternative name a matcher applies to.
type SANType uint8

// The SAN types Legate matches (Envoy's SubjectAltNameMatcher.SanType less
// OTHER_NAME).
const (
	SANDNS SANType = iota + 1
	SANURI
	SANEmail
	SANIP
)

// SANMatcher is one entry of match_typed_subject_alt_names. The legacy
// match_subject_alt_names entries become one matcher per type (DNS, URI,
// email, IP), as Envoy expands them. An exact matcher on a DNS SAN follows
// DNS rules: case-insensitive, and a certificate SAN "*.example.com" matches
// the value "a.example.com".
type SANMatcher struct {
	Type  SANType
	Match headermatch.String
}

// match reports whether value (a SAN of m.Type) satisfies the matcher.
func (m *SANMatcher) match(value string) bool {
	if m.Type == SANDNS {
		if exact, ok := m.Match.Exact(); ok {
			return dnsNameMatch(exact, value)
		}
	}
	return m.Match.Match(value)
}

// dnsNameMatch reports whether name matches the certificate's DNS SAN
// pattern, which may hold one '*' in its left-most label (not an A-label).
func dnsNameMatch(name, pattern string) bool {
	name, pattern = strings.ToLower(name), strings.ToLower(pattern)
	if name == pattern {
		return true
	}
	pLabel, pRest, ok1 := strings.Cut(pattern, ".")
	nLabel, nRest, ok2 := strings.Cut(name, ".")
	if !ok1 || !ok2 || !strings.Contains(pLabel, "*") || strings.Contains(pRest, "*") || strings.HasPrefix(pLabel, "xn--") {
		return false
	}
	if pRest != nRest {
		return false
	}
	if pLabel == "*" {
		return true
	}
	if strings.Count(pLabel, "*") != 1 || len(pLabel) > len(nLabel)+1 {
		return false
	}
	before, after, _ := strings.Cut(pLabel, "*")
	return strings.HasPrefix(nLabel, before) && strings.HasSuffix(nLabel, after)
}

// sanMatchersFromProto converts match_typed_subject_alt_names and the legacy
// match_subject_alt_names (which may not both be set). path names the
// validation context.
func sanMatchersFromProto(path string, pb *tlsv3.CertificateValidationContext) ([]SANMatcher, error) {
	typed, legacy := pb.GetMatchTypedSubjectAltNames(), pb.GetMatchSubjectAltNames()
	if len(typed) > 0 && len(legacy) > 0 {
		return nil, fmt.Errorf("%s: match_typed_subject_alt_names and match_subject_alt_names are both set; only one may be", path)
	}
	var out []SANMatcher
	for i, t := range typed {
		p := fmt.Sprintf("%s.match_typed_subject_alt_names[%d]", path, i)
		var typ SANType
		switch t.GetSanType() {
		case tlsv3.SubjectAltNameMatcher_DNS:
			typ = SANDNS
		case tlsv3.SubjectAltNameMatcher_URI:
			typ = SANURI
		case tlsv3.SubjectAltNameMatcher_EMAIL:
			typ = SANEmail
		case tlsv3.SubjectAltNameMatcher_IP_ADDRESS:
			typ = SANIP
		default:
			return nil, fmt.Errorf("%s.san_type = %s; must be one of DNS, URI, EMAIL, IP_ADDRESS", p, t.GetSanType())
		}
		m, err := stringMatchFromProto(p+".matcher", t.GetMatcher())
		if err != nil {
			return nil, err
		}
		out = append(out, SANMatcher{Type: typ, Match: m})
	}
	for i, l := range legacy {
		m, err := stringMatchFromProto(fmt.Sprintf("%s.match_subject_alt_names[%d]", path, i), l)
		if err != nil {
			return nil, err
		}
		for _, typ := range []SANType{SANDNS, SANURI, SANEmail, SANIP} {
			out = append(out, SANMatcher{Type: typ, Match: m})
		}
	}
	return out, nil
}

// stringMatchFromProto compiles a SAN StringMatcher with the same semantics
// as every other StringMatcher Legate applies (internal/headermatch). A bad
// regex keeps this package's error text.
func stringMatchFromProto(path string, pb *matcherv3.StringMatcher) (headermatch.String, error) {
	if re := pb.GetSafeRegex(); re != nil {
		if _, err := regexp.Compile(re.GetRegex()); err != nil {
			return headermatch.String{}, fmt.Errorf("%s.safe_regex.regex = %q: invalid regex: %w", path, re.GetRegex(), err)
		}
	}
	return headermatch.CompileString(pb, path)
}

// sanSet holds a certificate's subject alternative names as written in it, in
// certificate order within each kind.
type sanSet struct {
	DNS, URI, Email, IP []string
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// certificateSANs reads the SAN extension itself rather than Go's parsed
// fields so URIs keep their exact spelling (url.URL.String may re-encode).
// IP addresses print as Envoy prints them (IPv4-mapped IPv6 as ::ffff:a.b.c.d).
func certificateSANs(c *x509.Certificate) sanSet {
	var out sanSet
	for _, ext := range c.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}
		var seq asn1.RawValue
		rest, err := asn1.Unmarshal(ext.Value, &seq)
		if err != nil || len(rest) != 0 || !seq.IsCompound || seq.Tag != asn1.TagSequence {
			return out
		}
		for b := seq.Bytes; len(b) > 0; {
			var gn asn1.RawValue
			if b, err = asn1.Unmarshal(b, &gn); err != nil {
				return out
			}
			if gn.Class != asn1.ClassContextSpecific {
				continue
			}
			switch gn.Tag {
			case 1:
				out.Email = append(out.Email, string(gn.Bytes))
			case 2:
				out.DNS = append(out.DNS, string(gn.Bytes))
			case 6:
				out.URI = append(out.URI, string(gn.Bytes))
			case 7:
				if a, ok := netip.AddrFromSlice(gn.Bytes); ok {
					out.IP = append(out.IP, a.String())
				}
			}
		}
	}
	return out
}

// of returns the SANs of one type.
func (s *sanSet) of(t SANType) []string {
	switch t {
	case SANDNS:
		return s.DNS
	case SANURI:
		return s.URI
	case SANEmail:
		return s.Email
	}
	return s.IP
}
