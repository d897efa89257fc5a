package bootstrap_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/healthcheck"
	"github.com/legateproxy/legate/httpproxy/filters/ondemand"
	"github.com/legateproxy/legate/httpproxy/filters/tap"
)

// TestCatalogAgreesWithHTTPFilterFactories holds the loader's catalog (bootstrap.Extensions)
// and the HTTP filter factories the server registers to the same set of types, in both
// directions: every registered message type a factory answers to is in the catalog (so the
// loader never refuses a filter Legate builds), and every HTTP filter of the catalog has a
// factory, or is the router, which the connection manager runs itself.
func TestCatalogAgreesWithHTTPFilterFactories(t *testing.T) {
	r := filter.NewRegistry()
	for _, err := range []error{healthcheck.Register(r), ondemand.Register(r), tap.Register(r, tap.NewManager())} {
		if err != nil {
			t.Fatal(err)
		}
	}
	const router = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
	catalog := bootstrap.SupportedTypeURLs()
	built := func(url string) bool {
		_, ok := r.Lookup("a name no factory has", &anypb.Any{TypeUrl: url})
		return ok
	}
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		url := "type.googleapis.com/" + string(mt.Descriptor().FullName())
		if built(url) && !slices.Contains(catalog, url) {
			t.Errorf("an HTTP filter factory builds %s, which bootstrap.Extensions does not list", url)
		}
		return true
	})
	for _, e := range bootstrap.Extensions() {
		url := "type.googleapis.com/" + e.TypeName
		if e.Category == "envoy.filters.http" && url != router && !built(url) {
			t.Errorf("bootstrap.Extensions lists HTTP filter %s (%s), which no factory builds", e.Name, url)
		}
	}
}
