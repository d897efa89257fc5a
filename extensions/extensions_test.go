package extensions_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/legateproxy/legate/extensions"
)

// TestEveryExtensionLoads: New builds, and the loader resolves the typed_config type of every
// extension it lists (the loader refuses a type it cannot resolve as an extension Legate does
// not implement).
func TestEveryExtensionLoads(t *testing.T) {
	r, err := extensions.New()
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if len(r.Entries()) == 0 {
		t.Fatal("New() registered nothing")
	}
	for _, e := range r.Entries() {
		if _, err := protoregistry.GlobalTypes.FindMessageByURL(e.TypeURL()); err != nil {
			t.Errorf("%s %s: FindMessageByURL(%q) = %v; want the loader to resolve it", e.Category, e.Name, e.TypeURL(), err)
		}
	}
}
