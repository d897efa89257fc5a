package watch

import (
	"strings"
	"testing"

	"github.com/legateproxy/legate/logging"
)

// TestLogIgnored checks the one warning a response gets for the fields its resources set that
// Legate accepts without implementing.
func TestLogIgnored(t *testing.T) {
	var out strings.Builder
	reg, err := logging.New(logging.Config{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	log := reg.Logger("config")
	LogIgnored(log, "CDS", "cluster", nil)
	if out.Len() != 0 {
		t.Fatalf("logged %q for no ignored fields; want nothing", out.String())
	}
	LogIgnored(log, "CDS", "cluster", map[string]int{"track_cluster_stats": 3, "lrs_server": 1})
	want := "xds: CDS: set, but not implemented by Legate; ignored: lrs_server (1 cluster), track_cluster_stats (3 clusters)"
	if got := out.String(); !strings.Contains(got, want) || strings.Count(got, "\n") != 1 {
		t.Errorf("log = %q; want one line containing %q", got, want)
	}
}
