package route

import (
	"os"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// auditedMessages are the messages whose every field must be decided in routeFields.
var auditedMessages = []proto.Message{
	&routev3.RouteConfiguration{}, &routev3.VirtualHost{}, &routev3.Route{}, &routev3.RouteAction{},
	&routev3.RetryPolicy{}, &routev3.RetryPolicy_RetryBackOff{}, &routev3.RedirectAction{},
	&routev3.DirectResponseAction{}, &routev3.WeightedCluster{}, &routev3.WeightedCluster_ClusterWeight{},
	&routev3.RouteMatch{}, &routev3.HeaderMatcher{}, &routev3.QueryParameterMatcher{},
}

// TestRouteFieldsDecided: every field of the audited messages has a decision, and the table
// decides no field those messages lack, so a field a go-control-plane upgrade adds fails here
// (and is refused at Compile until decided).
func TestRouteFieldsDecided(t *testing.T) {
	if len(routeFields) != len(auditedMessages) {
		t.Errorf("routeFields decides %d messages; auditedMessages lists %d", len(routeFields), len(auditedMessages))
	}
	for _, m := range auditedMessages {
		d := m.ProtoReflect().Descriptor()
		table, ok := routeFields[d.FullName()]
		if !ok {
			t.Errorf("%s has no table in routeFields", d.FullName())
			continue
		}
		fs := d.Fields()
		for i := range fs.Len() {
			if _, ok := table[fs.Get(i).Name()]; !ok {
				t.Errorf("%s.%s has no decision in routeFields", d.FullName(), fs.Get(i).Name())
			}
		}
		for name := range table {
			if fs.ByName(name) == nil {
				t.Errorf("routeFields decides %s.%s, which does not exist", d.FullName(), name)
			}
		}
	}
}

// minimalRoutes is a route configuration that compiles: one virtual host, one route to a
// cluster with a retry policy, one to weighted clusters.
func minimalRoutes() *routev3.RouteConfiguration {
	match := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	return &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		Routes: []*routev3.Route{
			{Match: match, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"},
				RetryPolicy:      &routev3.RetryPolicy{RetryOn: "5xx"},
			}}},
			{Match: match, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
					Clusters: []*routev3.WeightedCluster_ClusterWeight{{Name: "c", Weight: wrapperspb.UInt32(1)}},
				}},
			}}},
		},
	}}}
}

// fieldHome finds in rc the message of the given type that a test sets a field of, and its
// path as Compile's errors spell it.
func fieldHome(rc *routev3.RouteConfiguration, msg protoreflect.FullName) (protoreflect.Message, string) {
	vh := rc.GetVirtualHosts()[0]
	a := vh.GetRoutes()[0].GetRoute()
	switch msg {
	case "envoy.config.route.v3.RouteConfiguration":
		return rc.ProtoReflect(), ""
	case "envoy.config.route.v3.VirtualHost":
		return vh.ProtoReflect(), "virtual_hosts[0]."
	case "envoy.config.route.v3.Route":
		return vh.GetRoutes()[0].ProtoReflect(), "virtual_hosts[0].routes[0]."
	case "envoy.config.route.v3.RouteAction":
		return a.ProtoReflect(), "virtual_hosts[0].routes[0].route."
	case "envoy.config.route.v3.RetryPolicy":
		return a.GetRetryPolicy().ProtoReflect(), "virtual_hosts[0].routes[0].route.retry_policy."
	case "envoy.config.route.v3.WeightedCluster":
		return vh.GetRoutes()[1].GetRoute().GetWeightedClusters().ProtoReflect(), "virtual_hosts[0].routes[1].route.weighted_clusters."
	}
	return nil, ""
}

// setSomething gives fd a value other than its default.
func setSomething(t *testing.T, m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	t.Helper()
	switch {
	case fd.IsList():
		l := m.Mutable(fd).List()
		l.Append(l.NewElement())
	case fd.Kind() == protoreflect.MessageKind:
		m.Set(fd, m.NewField(fd))
	case fd.Kind() == protoreflect.BoolKind:
		m.Set(fd, protoreflect.ValueOfBool(true))
	case fd.Kind() == protoreflect.EnumKind:
		m.Set(fd, protoreflect.ValueOfEnum(1))
	case fd.Kind() == protoreflect.StringKind:
		m.Set(fd, protoreflect.ValueOfString("x"))
	default:
		t.Fatalf("setSomething: %s has kind %s", fd.FullName(), fd.Kind())
	}
}

// TestRouteRefusedFields: each refused field, set, stops Compile with its path and "not
// implemented by Legate"; each ignored one compiles.
func TestRouteRefusedFields(t *testing.T) {
	for msg, table := range routeFields {
		for name, d := range table {
			if d == implemented {
				continue
			}
			t.Run(string(msg.Name())+"."+string(name), func(t *testing.T) {
				rc := minimalRoutes()
				m, path := fieldHome(rc, msg)
				if m == nil {
					t.Fatalf("no test home for %s", msg)
				}
				setSomething(t, m, m.Descriptor().Fields().ByName(name))
				_, err := Compile(rc, Options{})
				if d == ignored {
					if err != nil {
						t.Fatalf("Compile: %v; want the ignored field accepted", err)
					}
					return
				}
				want := path + string(name) + ": not implemented by Legate"
				if err == nil || err.Error() != want {
					t.Fatalf("Compile error = %v; want %q", err, want)
				}
			})
		}
	}
}

// TestRouteUndecidedFieldRefused: a set field without a decision (as one a newer API adds
// would be) is refused, not ignored.
func TestRouteUndecidedFieldRefused(t *testing.T) {
	table := routeFields["envoy.config.route.v3.VirtualHost"]
	delete(table, "name")
	defer func() { table["name"] = implemented }()
	_, err := Compile(minimalRoutes(), Options{})
	if want := "virtual_hosts[0].name: not implemented by Legate"; err == nil || err.Error() != want {
		t.Fatalf("Compile error = %v; want %q", err, want)
	}
}

// TestHedgePolicy: a hedge policy that would not hedge (Envoy's default) compiles, at both
// levels; one that would is refused with the field that makes it hedge.
func TestHedgePolicy(t *testing.T) {
	cases := []struct {
		name string
		p    *routev3.HedgePolicy
		want string // error suffix after the hedge_policy path; "" when accepted
	}{
		{"empty", &routev3.HedgePolicy{}, ""},
		{"one initial request", &routev3.HedgePolicy{InitialRequests: wrapperspb.UInt32(1)}, ""},
		{"zero chance", &routev3.HedgePolicy{AdditionalRequestChance: &typev3.FractionalPercent{}}, ""},
		{"two initial requests", &routev3.HedgePolicy{InitialRequests: wrapperspb.UInt32(2)}, ".initial_requests = 2: not implemented by Legate"},
		{"additional chance", &routev3.HedgePolicy{AdditionalRequestChance: &typev3.FractionalPercent{Numerator: 1}}, ".additional_request_chance: not implemented by Legate"},
		{"on per try timeout", &routev3.HedgePolicy{HedgeOnPerTryTimeout: true}, ".hedge_on_per_try_timeout: not implemented by Legate"},
	}
	for _, tc := range cases {
		for _, level := range []string{"virtual_hosts[0]", "virtual_hosts[0].routes[0].route"} {
			t.Run(tc.name+"/"+level, func(t *testing.T) {
				rc := minimalRoutes()
				if strings.HasSuffix(level, "route") {
					rc.VirtualHosts[0].Routes[0].GetRoute().HedgePolicy = tc.p
				} else {
					rc.VirtualHosts[0].HedgePolicy = tc.p
				}
				_, err := Compile(rc, Options{})
				switch {
				case tc.want == "" && err != nil:
					t.Fatalf("Compile: %v; want the policy accepted", err)
				case tc.want != "" && (err == nil || err.Error() != level+".hedge_policy"+tc.want):
					t.Fatalf("Compile error = %v; want %q", err, level+".hedge_policy"+tc.want)
				}
			})
		}
	}
}

// TestRouteDocListsRefused: doc.go names every field routeFields refuses or ignores.
func TestRouteDocListsRefused(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for msg, table := range routeFields {
		for name, d := range table {
			if d != implemented && !strings.Contains(string(doc), string(name)) {
				t.Errorf("doc.go does not mention %s.%s", msg.Name(), name)
			}
		}
	}
}
