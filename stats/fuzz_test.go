package stats

import (
	"strings"
	"testing"
)

func FuzzParseTag(f *testing.F) {
	for _, s := range []string{"a", "a,hidden", "h,unit=ms", "x,never_import,accumulate", ".a", "a.", "", "a,unit=", "a,,b"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, tag string, k uint8) {
		kind := Kind(k % 4)
		fd, err := parseTag(tag, kind)
		if err != nil {
			return
		}
		if fd.name == "" || strings.HasPrefix(fd.name, ".") || strings.HasSuffix(fd.name, ".") || strings.Contains(fd.name, ",") {
			t.Fatalf("parseTag(%q) accepted name %q", tag, fd.name)
		}
		if fd.kind != kind {
			t.Fatalf("kind = %v; want %v", fd.kind, kind)
		}
	})
}

// FuzzCompareSplit checks compareSplit against comparing the concatenations,
// and the token mode against comparing with '.' mapped below every byte.
func FuzzCompareSplit(f *testing.F) {
	f.Add("a.", "b", "a", ".b")
	f.Add("cluster.", "x", "cluster_manager.", "y")
	f.Fuzz(func(t *testing.T, a1, a2, b1, b2 string) {
		if got, want := compareSplit(a1, a2, b1, b2, false), strings.Compare(a1+a2, b1+b2); got != want {
			t.Fatalf("compareSplit(%q,%q,%q,%q) = %d; want %d", a1, a2, b1, b2, got, want)
		}
		if strings.ContainsRune(a1+a2+b1+b2, 0) {
			return
		}
		m := func(s string) string { return strings.ReplaceAll(s, ".", "\x00") }
		if got, want := compareSplit(a1, a2, b1, b2, true), strings.Compare(m(a1+a2), m(b1+b2)); got != want {
			t.Fatalf("token compareSplit(%q,%q,%q,%q) = %d; want %d", a1, a2, b1, b2, got, want)
		}
	})
}
