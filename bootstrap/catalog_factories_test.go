package bootstrap_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/extensions"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
)

// TestCatalogAgreesWithHTTPFilterFactories holds the loader's catalog (the registry's
// entries) and the HTTP filter factories the server builds from it to the same set of types,
// in both directions: every registered message type a factory answers to is in the catalog
// (so the loader never refuses a filter Legate builds), and every HTTP filter of the catalog
// has a factory, or is the router, which the connection manager runs itself.
func TestCatalogAgreesWithHTTPFilterFactories(t *testing.T) {
	ext, err := extensions.New()
	if err != nil {
		t.Fatal(err)
	}
	r, err := filter.FromRegistry(ext)
	if err != nil {
		t.Fatal(err)
	}
	const router = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
	var catalog []string
	for _, e := range ext.Entries() {
		catalog = append(catalog, e.TypeURL())
	}
	built := func(url string) bool {
		_, ok := r.Lookup("a name no factory has", &anypb.Any{TypeUrl: url})
		return ok
	}
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		url := "type.googleapis.com/" + string(mt.Descriptor().FullName())
		if built(url) && !slices.Contains(catalog, url) {
			t.Errorf("an HTTP filter factory builds %s, which the registry does not list", url)
		}
		return true
	})
	for _, e := range ext.Entries() {
		if e.Category == registry.HTTPFilter && e.TypeURL() != router && !built(e.TypeURL()) {
			t.Errorf("the registry lists HTTP filter %s (%s), which no factory builds", e.Name, e.TypeURL())
		}
	}
}
