package extensions_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/extensions"
	"github.com/legateproxy/legate/internal/registry"
)

var update = flag.Bool("update", false, "rewrite the README's list of extensions from the registry")

const (
	readmePath  = "../README.md"
	listBegin   = "<!-- extensions: generated from the registry by `go test ./extensions -update`; do not edit -->"
	listEnd     = "<!-- end of extensions -->"
	listHeading = "| category | extension | typed_config |\n|---|---|---|\n"
)

// markdown renders r's extensions as the README lists them, one row each, in Entries' order.
func markdown(r *registry.Registry) string {
	var b strings.Builder
	b.WriteString(listHeading)
	for _, e := range r.Entries() {
		fmt.Fprintf(&b, "| `%s` | `%s` | `%s` |\n", e.Category, e.Name, e.TypeName())
	}
	return b.String()
}

// TestREADMEListsExtensions holds the README's list of implemented extensions equal to the
// registry (issue 19): adding an extension to extensions.New without regenerating the list
// fails here.
func TestREADMEListsExtensions(t *testing.T) {
	r, err := extensions.New()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	begin, end := strings.Index(readme, listBegin), strings.Index(readme, listEnd)
	if begin < 0 || end < begin {
		t.Fatalf("README.md has no generated list between %q and %q", listBegin, listEnd)
	}
	begin += len(listBegin) + 1
	want := markdown(r)
	if *update {
		readme = readme[:begin] + want + readme[end:]
		if err := os.WriteFile(readmePath, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, readme[begin:end]); diff != "" {
		t.Errorf("README.md's list of extensions differs from the registry; run go test ./extensions -update (-registry +README):\n%s", diff)
	}
}
