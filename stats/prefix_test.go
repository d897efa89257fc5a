package stats

import "testing"

// TestPrefixJoin: a dot joins a prefix and a name unless the prefix is empty or ends with one.
func TestPrefixJoin(t *testing.T) {
	for _, tc := range []struct{ prefix, name, want string }{
		{"", "a", "a"},
		{"p", "a", "p.a"},
		{"p.", "a", "p.a"},
		{"x.p", "", "x.p."},
	} {
		if got := PrefixJoin(tc.prefix, tc.name); got != tc.want {
			t.Errorf("PrefixJoin(%q, %q) = %q; want %q", tc.prefix, tc.name, got, tc.want)
		}
	}
}
