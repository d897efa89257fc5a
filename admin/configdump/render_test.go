package configdump_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/admin/configdump"
)

var updated = timestamppb.New(time.Date(2025, 1, 1, 0, 0, 0, 123e6, time.UTC))

func add(t testing.TB, r *configdump.Registry, key string, dump func(func(string) bool) proto.Message) {
	t.Helper()
	if err := r.Add(configdump.Tracker{Key: key, Dump: dump}); err != nil {
		t.Fatalf("Add(%q) error: %v", key, err)
	}
}

// emptyRegistry has a bootstrap and the five always-present dumps, empty.
func emptyRegistry(t testing.TB) *configdump.Registry {
	r := configdump.NewRegistry()
	// Registered out of order on purpose: Render sorts by key.
	add(t, r, "secrets", func(func(string) bool) proto.Message { return &adminv3.SecretsConfigDump{} })
	add(t, r, "routes", func(func(string) bool) proto.Message { return &adminv3.RoutesConfigDump{} })
	add(t, r, "bootstrap", func(func(string) bool) proto.Message {
		return &adminv3.BootstrapConfigDump{
			Bootstrap: &bootstrapv3.Bootstrap{Node: &corev3.Node{
				Id: "node1", UserAgentName: "envoy",
				Extensions: []*corev3.Extension{{Name: "ext1"}, {Name: "ext2"}},
			}},
			LastUpdated: updated,
		}
	})
	add(t, r, "route_scopes", func(func(string) bool) proto.Message { return &adminv3.ScopedRoutesConfigDump{} })
	add(t, r, "listeners", func(func(string) bool) proto.Message { return &adminv3.ListenersConfigDump{} })
	add(t, r, "clusters", func(func(string) bool) proto.Message { return &adminv3.ClustersConfigDump{} })
	return r
}

// fullRegistry adds clusters, a secret and endpoints whose trackers apply
// the name filter.
func fullRegistry(t testing.TB) *configdump.Registry {
	r := emptyRegistry(t)
	r.Remove("clusters")
	r.Remove("secrets")
	// The resources are built here, not in the Dump functions: those run
	// inside Render, where a fuzz target's F must not be used.
	staticA := mustAny(t, tlsCluster(t, inlineString("KEY")))
	dynamic := map[string]*anypb.Any{}
	for _, name := range []string{"service_a", "service_b"} {
		dynamic[name] = mustAny(t, &clusterv3.Cluster{
			Name: name, ConnectTimeout: durationpb.New(time.Second), AltStatName: name + "_stats",
		})
	}
	secret := mustAny(t, &tlsv3.Secret{Name: "server_cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: filename("/certs/cert.pem"),
		PrivateKey:       inlineString("-----BEGIN PRIVATE KEY-----"),
	}}})
	endpoints := mustAny(t, &endpointv3.ClusterLoadAssignment{ClusterName: "service_a"})
	add(t, r, "clusters", func(match func(string) bool) proto.Message {
		d := &adminv3.ClustersConfigDump{VersionInfo: "v2"}
		if match("static_a") {
			d.StaticClusters = append(d.StaticClusters, &adminv3.ClustersConfigDump_StaticCluster{
				Cluster: staticA, LastUpdated: updated,
			})
		}
		for _, name := range []string{"service_a", "service_b"} {
			if !match(name) {
				continue
			}
			d.DynamicActiveClusters = append(d.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{
				VersionInfo: "v1", Cluster: dynamic[name], LastUpdated: updated,
			})
		}
		return d
	})
	add(t, r, "secrets", func(match func(string) bool) proto.Message {
		d := &adminv3.SecretsConfigDump{}
		if match("server_cert") {
			d.StaticSecrets = append(d.StaticSecrets, &adminv3.SecretsConfigDump_StaticSecret{
				Name: "server_cert", LastUpdated: updated, Secret: secret,
			})
		}
		return d
	})
	add(t, r, configdump.EndpointKey, func(match func(string) bool) proto.Message {
		d := &adminv3.EndpointsConfigDump{}
		if match("service_a") {
			d.StaticEndpointConfigs = append(d.StaticEndpointConfigs, &adminv3.EndpointsConfigDump_StaticEndpointConfig{
				EndpointConfig: endpoints,
			})
		}
		return d
	})
	return r
}

func render(t *testing.T, r *configdump.Registry, req configdump.Request) (int, string, string, error) {
	t.Helper()
	var buf bytes.Buffer
	status, ct, err := r.Render(&buf, req)
	return status, ct, buf.String(), err
}

const emptyDump = `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump",
   "bootstrap": {
    "node": {
     "id": "node1",
     "user_agent_name": "envoy",
     "extensions": [
      {
       "name": "ext1"
      },
      {
       "name": "ext2"
      }
     ]
    }
   },
   "last_updated": "2025-01-01T00:00:00.123Z"
  },
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump"
  },
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump"
  },
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ScopedRoutesConfigDump"
  },
  {
   "@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump"
  },
  {
   "@type": "type.googleapis.com/envoy.admin.v3.SecretsConfigDump"
  }
 ]
}
`

func TestRenderWholeDump(t *testing.T) {
	status, ct, body, err := render(t, emptyRegistry(t), configdump.Request{})
	if err != nil || status != http.StatusOK || ct != "application/json" {
		t.Fatalf("Render() = %d, %q, %v; want 200, application/json, nil", status, ct, err)
	}
	if diff := cmp.Diff(emptyDump, body); diff != "" {
		t.Errorf("body mismatch (-want +got):\n%s", diff)
	}
	var dump adminv3.ConfigDump
	if err := protojson.Unmarshal([]byte(body), &dump); err != nil {
		t.Fatalf("strict protojson.Unmarshal(body) error: %v", err)
	}
	var gotTypes []string
	for _, c := range dump.Configs {
		gotTypes = append(gotTypes, strings.TrimPrefix(c.TypeUrl, "type.googleapis.com/envoy.admin.v3."))
	}
	wantTypes := []string{"BootstrapConfigDump", "ClustersConfigDump", "ListenersConfigDump", "ScopedRoutesConfigDump", "RoutesConfigDump", "SecretsConfigDump"}
	if diff := cmp.Diff(wantTypes, gotTypes); diff != "" {
		t.Errorf("config types mismatch (-want +got):\n%s", diff)
	}
	var boot adminv3.BootstrapConfigDump
	if err := dump.Configs[0].UnmarshalTo(&boot); err != nil {
		t.Fatal(err)
	}
	if got := boot.GetBootstrap().GetNode().GetId(); got != "node1" {
		t.Errorf("bootstrap.node.id = %q; want node1", got)
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name   string
		req    configdump.Request
		status int
		body   string
	}{
		{
			name:   "resource with mask splits into the any",
			req:    configdump.Request{Resource: "dynamic_active_clusters", Mask: "cluster.name,version_info"},
			status: http.StatusOK,
			body: `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster",
   "version_info": "v1",
   "cluster": {
    "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
    "name": "service_a"
   }
  },
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster",
   "version_info": "v1",
   "cluster": {
    "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
    "name": "service_b"
   }
  }
 ]
}
`,
		},
		{
			name:   "resource with name regex full match",
			req:    configdump.Request{Resource: "dynamic_active_clusters", Mask: "cluster.name", NameRegex: "service_.*b"},
			status: http.StatusOK,
			body: `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster",
   "cluster": {
    "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
    "name": "service_b"
   }
  }
 ]
}
`,
		},
		{
			name:   "name regex is not a substring match",
			req:    configdump.Request{Resource: "dynamic_active_clusters", NameRegex: "service"},
			status: http.StatusOK,
			body:   "{}\n",
		},
		{
			name:   "resource secrets are redacted",
			req:    configdump.Request{Resource: "static_secrets"},
			status: http.StatusOK,
			body: `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.SecretsConfigDump.StaticSecret",
   "name": "server_cert",
   "last_updated": "2025-01-01T00:00:00.123Z",
   "secret": {
    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
    "name": "server_cert",
    "tls_certificate": {
     "certificate_chain": {
      "filename": "/certs/cert.pem"
     },
     "private_key": {
      "inline_string": "[redacted]"
     }
    }
   }
  }
 ]
}
`,
		},
		{
			name:   "mask alone keeps fitting dumps only",
			req:    configdump.Request{Mask: "bootstrap.node.id"},
			status: http.StatusOK,
			body: `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump",
   "bootstrap": {
    "node": {
     "id": "node1"
    }
   }
  }
 ]
}
`,
		},
		{
			name:   "mask alone on a repeated leaf with the static cluster redacted",
			req:    configdump.Request{Mask: "static_clusters", NameRegex: "static_a"},
			status: http.StatusOK,
			body: `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
   "static_clusters": [
    {
     "cluster": {
      "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
      "name": "backend",
      "transport_socket": {
       "name": "envoy.transport_sockets.tls",
       "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        "common_tls_context": {
         "tls_certificates": [
          {
           "certificate_chain": {
            "filename": "/certs/client.pem"
           },
           "private_key": {
            "inline_string": "[redacted]"
           },
           "password": {
            "inline_string": "[redacted]"
           }
          }
         ]
        },
        "sni": "backend.example.com"
       }
      }
     },
     "last_updated": "2025-01-01T00:00:00.123Z"
    }
   ]
  }
 ]
}
`,
		},
		{
			name:   "endpoints only with include_eds",
			req:    configdump.Request{Resource: "static_endpoint_configs"},
			status: http.StatusNotFound,
			body:   "static_endpoint_configs not found in config dump",
		},
		{
			name:   "endpoints with include_eds",
			req:    configdump.Request{Resource: "static_endpoint_configs", IncludeEDS: true},
			status: http.StatusOK,
			body: `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump.StaticEndpointConfig",
   "endpoint_config": {
    "@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
    "cluster_name": "service_a"
   }
  }
 ]
}
`,
		},
		{
			name:   "bad name regex",
			req:    configdump.Request{NameRegex: "("},
			status: http.StatusBadRequest,
			body:   "INVALID_ARGUMENT: Error while parsing name_regex from (: missing ): (",
		},
		{
			name:   "bad name regex checked before anchoring",
			req:    configdump.Request{NameRegex: "a)|(b", Resource: "static_clusters"},
			status: http.StatusBadRequest,
			body:   "INVALID_ARGUMENT: Error while parsing name_regex from a)|(b: unexpected ): a)|(b",
		},
		{
			name:   "resource not repeated",
			req:    configdump.Request{Resource: "bootstrap"},
			status: http.StatusBadRequest,
			body:   "bootstrap is not a repeated field. Use ?mask=bootstrap to get only this field",
		},
		{
			name:   "resource not found",
			req:    configdump.Request{Resource: "no_such_field"},
			status: http.StatusNotFound,
			body:   "no_such_field not found in config dump",
		},
		{
			name:   "mask invalid inside the any",
			req:    configdump.Request{Resource: "dynamic_active_clusters", Mask: "cluster.bad"},
			status: http.StatusBadRequest,
			body:   "FieldMask paths: \"cluster.bad\"\n could not be successfully used.",
		},
		{
			name:   "mask invalid outside the any",
			req:    configdump.Request{Resource: "dynamic_active_clusters", Mask: "cluster.name,,bogus"},
			status: http.StatusBadRequest,
			body:   "FieldMask paths: \"cluster.name\"\npaths: \"bogus\"\n could not be successfully used.",
		},
		{
			name:   "mask cannot index a repeated field inside the any",
			req:    configdump.Request{Resource: "static_clusters", Mask: "cluster.transport_socket_matches.name"},
			status: http.StatusBadRequest,
			body:   "FieldMask paths: \"cluster.transport_socket_matches.name\"\n could not be successfully used.",
		},
		{
			name:   "mask naming only the any field",
			req:    configdump.Request{Resource: "dynamic_active_clusters", Mask: "cluster"},
			status: http.StatusBadRequest,
			body:   "FieldMask paths: \"cluster\"\n could not be successfully used.",
		},
		{
			name:   "mask fits no dump",
			req:    configdump.Request{Mask: "bootstrap.node.extensions.name"},
			status: http.StatusBadRequest,
			body:   "FieldMask bootstrap.node.extensions.name could not be successfully applied to any configs.",
		},
	}
	r := fullRegistry(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, ct, body, err := render(t, r, tc.req)
			if status != tc.status {
				t.Errorf("Render() status = %d; want %d", status, tc.status)
			}
			wantCT := "application/json"
			if tc.status != http.StatusOK {
				wantCT = "text/plain"
				var re *configdump.RequestError
				if !errors.As(err, &re) || re.Error() != body || re.Status != status {
					t.Errorf("Render() error = %v; want *RequestError with the body and status", err)
				}
			} else if err != nil {
				t.Errorf("Render() error = %v; want nil", err)
			}
			if ct != wantCT {
				t.Errorf("Render() content type = %q; want %q", ct, wantCT)
			}
			if diff := cmp.Diff(tc.body, body); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
			if status == http.StatusOK {
				var dump adminv3.ConfigDump
				if err := protojson.Unmarshal([]byte(body), &dump); err != nil {
					t.Errorf("strict protojson.Unmarshal(body) error: %v", err)
				}
			}
		})
	}
}

func TestRenderDoesNotModifyTrackerMessages(t *testing.T) {
	shared := &adminv3.SecretsConfigDump{StaticSecrets: []*adminv3.SecretsConfigDump_StaticSecret{{
		Name:   "s",
		Secret: mustAny(t, &tlsv3.Secret{Name: "s", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{PrivateKey: inlineString("KEY")}}}),
	}}}
	boot := &adminv3.BootstrapConfigDump{Bootstrap: &bootstrapv3.Bootstrap{StaticResources: &bootstrapv3.Bootstrap_StaticResources{
		Secrets: []*tlsv3.Secret{{Name: "s", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{PrivateKey: inlineString("KEY")}}}},
	}}}
	wantShared, wantBoot := proto.Clone(shared), proto.Clone(boot)
	r := configdump.NewRegistry()
	add(t, r, "secrets", func(func(string) bool) proto.Message { return shared })
	add(t, r, "bootstrap", func(func(string) bool) proto.Message { return boot })
	for _, req := range []configdump.Request{{}, {Mask: "static_secrets"}, {Resource: "static_secrets", Mask: "secret.name"}} {
		if status, _, body, err := render(t, r, req); status != http.StatusOK || strings.Contains(body, "KEY") {
			t.Fatalf("Render(%+v) = %d, %v, body holds the key: %v", req, status, err, strings.Contains(body, "KEY"))
		}
	}
	if !proto.Equal(shared, wantShared) || !proto.Equal(boot, wantBoot) {
		t.Errorf("Render modified the trackers' messages")
	}
}

func TestRegistry(t *testing.T) {
	r := &configdump.Registry{} // the zero value is usable
	dump := func(func(string) bool) proto.Message { return &adminv3.RoutesConfigDump{} }
	tests := []struct {
		name    string
		tracker configdump.Tracker
		wantErr string
	}{
		{name: "first add", tracker: configdump.Tracker{Key: "routes", Dump: dump}},
		{name: "duplicate", tracker: configdump.Tracker{Key: "routes", Dump: dump}, wantErr: `configdump: tracker "routes" is already registered`},
		{name: "empty key", tracker: configdump.Tracker{Dump: dump}, wantErr: "configdump: tracker key is empty"},
		{name: "nil dump", tracker: configdump.Tracker{Key: "x"}, wantErr: `configdump: tracker "x": Dump is nil`},
		{name: "nil result skipped", tracker: configdump.Tracker{Key: "ecds_filter_http", Dump: func(func(string) bool) proto.Message { return nil }}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Add(tc.tracker)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Add() error = %q; want %q", got, tc.wantErr)
			}
		})
	}
	const want = "{\n \"configs\": [\n  {\n   \"@type\": \"type.googleapis.com/envoy.admin.v3.RoutesConfigDump\"\n  }\n ]\n}\n"
	if _, _, body, _ := render(t, r, configdump.Request{}); body != want {
		t.Errorf("Render() body = %q; want %q", body, want)
	}
	r.Remove("routes")
	r.Remove("not there")
	if _, _, body, _ := render(t, r, configdump.Request{}); body != "{}\n" {
		t.Errorf("Render() after Remove body = %q; want %q", body, "{}\n")
	}
}

func TestRenderUnprintable(t *testing.T) {
	r := configdump.NewRegistry()
	add(t, r, "clusters", func(func(string) bool) proto.Message {
		return &adminv3.ClustersConfigDump{StaticClusters: []*adminv3.ClustersConfigDump_StaticCluster{{
			Cluster: mustAny(t, &clusterv3.Cluster{Name: "c", ConnectTimeout: &durationpb.Duration{Seconds: -1, Nanos: 1}}),
		}}}
	})
	status, ct, body, err := render(t, r, configdump.Request{})
	if status != http.StatusInternalServerError || ct != "text/plain" || err == nil || body != err.Error() {
		t.Errorf("Render() = %d, %q, %q, %v; want 500, text/plain and the error as body", status, ct, body, err)
	}
}

func TestRenderConcurrent(t *testing.T) {
	r := fullRegistry(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("ecds_filter_%d", i)
			for range 20 {
				if err := r.Add(configdump.Tracker{Key: key, Dump: func(func(string) bool) proto.Message { return &adminv3.EcdsConfigDump{} }}); err != nil {
					t.Errorf("Add(%q) error: %v", key, err)
					return
				}
				var buf bytes.Buffer
				if status, _, err := r.Render(&buf, configdump.Request{NameRegex: "service_.*"}); status != http.StatusOK {
					t.Errorf("Render() = %d, %v; want 200", status, err)
					return
				}
				r.Remove(key)
			}
		}()
	}
	wg.Wait()
}
