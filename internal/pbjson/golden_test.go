package pbjson_test

import (
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/internal/pbjson"
)

func ts(t *testing.T, s string) *timestamppb.Timestamp {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return timestamppb.New(tm)
}

func mustMarshal(t *testing.T, m proto.Message, mode pbjson.Mode) string {
	t.Helper()
	b, err := pbjson.Marshal(m, mode)
	if err != nil {
		t.Fatalf("Marshal(%T) error: %v", m, err)
	}
	return string(b)
}

// TestGoldenCerts prints the /certs example of the admin reference (§4).
func TestGoldenCerts(t *testing.T) {
	certs := &adminv3.Certificates{Certificates: []*adminv3.Certificate{{
		CaCert: []*adminv3.CertificateDetails{{
			Path:                "/etc/ssl/ca.pem",
			SerialNumber:        "0a1b2c",
			DaysUntilExpiration: 364,
			ValidFrom:           ts(t, "2025-01-01T00:00:00Z"),
			ExpirationTime:      ts(t, "2026-01-01T00:00:00Z"),
		}},
		CertChain: []*adminv3.CertificateDetails{{
			Path:         "<inline>",
			SerialNumber: "7f00aa",
			SubjectAltNames: []*adminv3.SubjectAlternateName{{
				Name: &adminv3.SubjectAlternateName_Dns{Dns: "example.com"},
			}},
			DaysUntilExpiration: 89,
			ValidFrom:           ts(t, "2025-03-01T00:00:00Z"),
			ExpirationTime:      ts(t, "2025-06-01T00:00:00Z"),
		}},
	}}}
	want := `{
 "certificates": [
  {
   "ca_cert": [
    {
     "path": "/etc/ssl/ca.pem",
     "serial_number": "0a1b2c",
     "subject_alt_names": [],
     "days_until_expiration": "364",
     "valid_from": "2025-01-01T00:00:00Z",
     "expiration_time": "2026-01-01T00:00:00Z"
    }
   ],
   "cert_chain": [
    {
     "path": "\u003cinline\u003e",
     "serial_number": "7f00aa",
     "subject_alt_names": [
      {
       "dns": "example.com"
      }
     ],
     "days_until_expiration": "89",
     "valid_from": "2025-03-01T00:00:00Z",
     "expiration_time": "2025-06-01T00:00:00Z"
    }
   ]
  }
 ]
}
`
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{name: "example", msg: certs, want: want},
		{name: "no contexts", msg: &adminv3.Certificates{}, want: "{\n \"certificates\": []\n}\n"},
		{
			name: "empty context",
			msg:  &adminv3.Certificates{Certificates: []*adminv3.Certificate{{}}},
			want: "{\n \"certificates\": [\n  {\n   \"ca_cert\": [],\n   \"cert_chain\": []\n  }\n ]\n}\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, mustMarshal(t, tc.msg, pbjson.AllFields)); diff != "" {
				t.Errorf("Marshal(AllFields) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGoldenServerInfo prints the /server_info example of the admin
// reference (§15). go-control-plane v1.40 has two fields the example
// predates (command_line_options.log_stacktrace_single_entry = 43 and
// hot_restart_initializing = 8); all-fields mode prints them at their
// defaults, in field-number order.
func TestGoldenServerInfo(t *testing.T) {
	metadata, err := structpb.NewStruct(map[string]any{
		"revision.status": "Clean",
		"build.type":      "RELEASE",
		"ssl.version":     "BoringSSL",
		"build.label":     "dev",
		"revision.sha":    "0d4ea7c6bd16e0b4ef0e4f29ad1f5ab7bb4bc2a9",
	})
	if err != nil {
		t.Fatal(err)
	}
	info := &adminv3.ServerInfo{
		Version:            "0d4ea7c6bd16e0b4ef0e4f29ad1f5ab7bb4bc2a9/1.37.0-dev/Clean/RELEASE/BoringSSL",
		State:              adminv3.ServerInfo_LIVE,
		UptimeCurrentEpoch: durationpb.New(12 * time.Second),
		UptimeAllEpochs:    durationpb.New(12 * time.Second),
		HotRestartVersion:  "11.104",
		CommandLineOptions: &adminv3.CommandLineOptions{
			Concurrency:        8,
			ConfigPath:         "/etc/envoy/envoy.yaml",
			LogLevel:           "info",
			LogFormat:          "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v",
			FileFlushInterval:  durationpb.New(10 * time.Second),
			DrainTime:          durationpb.New(600 * time.Second),
			ParentShutdownTime: durationpb.New(900 * time.Second),
			SocketPath:         "@envoy_domain_socket",
		},
		Node: &corev3.Node{
			Id:            "node1",
			Cluster:       "cluster1",
			UserAgentName: "envoy",
			UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
				Version:  &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 37},
				Metadata: metadata,
			}},
			Extensions: []*corev3.Extension{{
				Name:     "envoy.filters.http.router",
				Category: "envoy.filters.http",
				TypeUrls: []string{"envoy.extensions.filters.http.router.v3.Router"},
			}},
		},
	}
	want := `{
 "version": "0d4ea7c6bd16e0b4ef0e4f29ad1f5ab7bb4bc2a9/1.37.0-dev/Clean/RELEASE/BoringSSL",
 "state": "LIVE",
 "uptime_current_epoch": "12s",
 "uptime_all_epochs": "12s",
 "hot_restart_version": "11.104",
 "command_line_options": {
  "base_id": "0",
  "concurrency": 8,
  "config_path": "/etc/envoy/envoy.yaml",
  "config_yaml": "",
  "allow_unknown_static_fields": false,
  "admin_address_path": "",
  "local_address_ip_version": "v4",
  "log_level": "info",
  "component_log_level": "",
  "log_format": "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v",
  "log_path": "",
  "service_cluster": "",
  "service_node": "",
  "service_zone": "",
  "file_flush_interval": "10s",
  "drain_time": "600s",
  "parent_shutdown_time": "900s",
  "mode": "Serve",
  "disable_hot_restart": false,
  "enable_mutex_tracing": false,
  "restart_epoch": 0,
  "cpuset_threads": false,
  "reject_unknown_dynamic_fields": false,
  "log_format_escaped": false,
  "disabled_extensions": [],
  "ignore_unknown_dynamic_fields": false,
  "use_dynamic_base_id": false,
  "base_id_path": "",
  "drain_strategy": "Gradual",
  "enable_fine_grain_logging": false,
  "socket_path": "@envoy_domain_socket",
  "socket_mode": 0,
  "enable_core_dump": false,
  "stats_tag": [],
  "skip_hot_restart_on_no_parent": false,
  "skip_hot_restart_parent_stats": false,
  "skip_deprecated_logs": false,
  "file_flush_min_size": 0,
  "log_stacktrace_single_entry": false
 },
 "node": {
  "id": "node1",
  "cluster": "cluster1",
  "user_agent_name": "envoy",
  "user_agent_build_version": {
   "version": {
    "major_number": 1,
    "minor_number": 37,
    "patch": 0
   },
   "metadata": {
    "build.label": "dev",
    "build.type": "RELEASE",
    "revision.sha": "0d4ea7c6bd16e0b4ef0e4f29ad1f5ab7bb4bc2a9",
    "revision.status": "Clean",
    "ssl.version": "BoringSSL"
   }
  },
  "extensions": [
   {
    "name": "envoy.filters.http.router",
    "category": "envoy.filters.http",
    "type_descriptor": "",
    "disabled": false,
    "type_urls": [
     "envoy.extensions.filters.http.router.v3.Router"
    ]
   }
  ],
  "client_features": [],
  "listening_addresses": [],
  "dynamic_parameters": {}
 },
 "hot_restart_initializing": false
}
`
	if diff := cmp.Diff(want, mustMarshal(t, info, pbjson.AllFields)); diff != "" {
		t.Errorf("Marshal(ServerInfo, AllFields) mismatch (-want +got):\n%s", diff)
	}
}

// TestGoldenRedactedSecret prints the SecretsConfigDump of the admin
// reference's redaction example (§6.8) with defaults omitted.
func TestGoldenRedactedSecret(t *testing.T) {
	secret, err := anypb.New(&tlsv3.Secret{
		Name: "server_cert",
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/certs/cert.pem"}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "[redacted]"}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	dump, err := anypb.New(&adminv3.SecretsConfigDump{StaticSecrets: []*adminv3.SecretsConfigDump_StaticSecret{{
		Name:        "server_cert",
		LastUpdated: ts(t, "2025-01-01T00:00:00.123Z"),
		Secret:      secret,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
 "configs": [
  {
   "@type": "type.googleapis.com/envoy.admin.v3.SecretsConfigDump",
   "static_secrets": [
    {
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
  },
  {
   "@type": "type.googleapis.com/envoy.admin.v3.ScopedRoutesConfigDump"
  }
 ]
}
`
	empty, err := anypb.New(&adminv3.ScopedRoutesConfigDump{})
	if err != nil {
		t.Fatal(err)
	}
	got := mustMarshal(t, &adminv3.ConfigDump{Configs: []*anypb.Any{dump, empty}}, pbjson.OmitDefaults)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Marshal(ConfigDump) mismatch (-want +got):\n%s", diff)
	}
}
