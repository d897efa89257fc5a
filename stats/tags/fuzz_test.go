package tags

import (
	"strings"
	"testing"
)

// FuzzExtract checks invariants of Extract on arbitrary names: it never
// panics, never lengthens the name, keeps what the caller passed in, tags
// unique per name, and the prefilters derived from each regex never reject a
// name the regex would match.
func FuzzExtract(f *testing.F) {
	for _, seed := range []string{
		"cluster.foo.upstream_rq_200",
		"listener.0.0.0.0_10000.worker_0.downstream_cx_total",
		"listener.[__]_443.http.ingress.downstream_rq_5xx",
		"http.egress_dynamodb_iad.dynamodb.table.bar_table.capacity.Query.__partition_id=ABC1234",
		"mongo.m.collection.c.callsite.s.query.q",
		"proxy_proto.pp1.versions.v2.found",
		"http.ingress.rbac.rules1.policy.p1.shadow_denied",
		"x.rbac.y", "a..b", ".", "", "tcp.", "\xff.\x00",
	} {
		f.Add(seed)
	}
	p, err := New(Config{
		Fixed: []Tag{{"region", "eu"}},
		Custom: []Spec{{TagName: "custom", Regex: `^cluster\.(?:x\.)?((\w+)_svc\.)`}, {TagName: ClusterName},
			{TagName: "ecma", Regex: `^listener(?=\.)\.(([[:digit:]_.]+?)\.)`}}, // lookahead: regexp2's ECMAScript mode
	})
	if err != nil {
		f.Fatalf("New() error: %v", err)
	}
	var all []*Extractor
	all = append(all, p.unprefixed...)
	for _, list := range p.byPrefix {
		all = append(all, list...)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if len(name) > 512 {
			// Stat names are short; long inputs only slow the fuzzer's
			// minimisation down under coverage instrumentation.
			t.Skip()
		}
		in := []Tag{{"given", "v"}}
		got, tags := p.Extract(name, in)
		if len(got) > len(name) {
			t.Errorf("Extract(%q) = %q; longer than the name", name, got)
		}
		if len(tags) < 1 || tags[0] != (Tag{"given", "v"}) {
			t.Fatalf("Extract(%q) tags = %v; lost the caller's tag", name, tags)
		}
		seen := map[string]bool{}
		for _, tag := range tags[1:] {
			if seen[tag.Name] {
				t.Errorf("Extract(%q) tags = %v; %q twice", name, tags, tag.Name)
			}
			seen[tag.Name] = true
		}
		if !seen["region"] {
			t.Errorf("Extract(%q) tags = %v; fixed tag missing", name, tags)
		}
		checkFast(t, name)
		for _, e := range all {
			if e.re == nil || e.re.FindStringIndex(name) == nil {
				continue
			}
			if !strings.HasPrefix(name, e.mustStart) || !strings.Contains(name, e.mustContain) {
				t.Errorf("%s regex %q matches %q but its prefilter (%q, %q) rejects it",
					e.name, e.re, name, e.mustStart, e.mustContain)
			}
		}
	})
}
