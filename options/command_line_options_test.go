package options

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
)

// defaultJSON is command_line_options as Envoy prints it in /server_info for a command line
// without options (envoy-admin-formats.md §15), with %d for the CPU count, plus field 43
// (log_stacktrace_single_entry) that go-control-plane v1.40 has.
const defaultJSON = `{
 "base_id": "0",
 "concurrency": %d,
 "config_path": "",
 "config_yaml": "",
 "allow_unknown_static_fields": false,
 "admin_address_path": "",
 "local_address_ip_version": "v4",
 "log_level": "info",
 "component_log_level": "",
 "log_format": "[%%Y-%%m-%%d %%T.%%e][%%t][%%l][%%n] [%%g:%%#] %%v",
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
}`

func TestCommandLineOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// want is the expected message as Envoy's JSON, decoded with protojson.
		want string
	}{
		{name: "defaults", want: fmt.Sprintf(defaultJSON, runtime.NumCPU())},
		{name: "every option", args: []string{
			"--base-id", "5", "--concurrency", "3", "-c", "/etc/envoy.yaml", "--config-yaml", "{}",
			"--allow-unknown-fields", "--admin-address-path", "/tmp/admin", "--local-address-ip-version", "v6",
			"-l", "warn", "--component-log-level", "upstream:debug,config:trace", "--log-format", "%v",
			"--log-path", "/tmp/log", "--service-cluster", "sc", "--service-node", "sn", "--service-zone", "sz",
			"--file-flush-interval-msec", "1500", "--file-flush-min-size-kb", "128", "--drain-time-s", "60",
			"--parent-shutdown-time-s", "90", "--mode", "validate", "--disable-hot-restart",
			"--enable-mutex-tracing", "--restart-epoch", "2", "--cpuset-threads", "--reject-unknown-dynamic-fields",
			"--log-format-escaped", "--disable-extensions", "a/b,c/d", "--ignore-unknown-dynamic-fields",
			"--base-id-path", "/tmp/base", "--drain-strategy", "immediate", "--socket-path", "/tmp/sock",
			"--socket-mode", "644", "--enable-core-dump", "--stats-tag", "env:prod", "--stats-tag", "dc:x:y",
			"--skip-hot-restart-on-no-parent", "--skip-hot-restart-parent-stats", "--skip-deprecated-logs",
			"--log-stacktrace-single-entry",
		}, want: `{
 "base_id": "5",
 "concurrency": 3,
 "config_path": "/etc/envoy.yaml",
 "config_yaml": "{}",
 "allow_unknown_static_fields": true,
 "admin_address_path": "/tmp/admin",
 "local_address_ip_version": "v6",
 "log_level": "warning",
 "component_log_level": "upstream:debug,config:trace",
 "log_format": "%v",
 "log_path": "/tmp/log",
 "service_cluster": "sc",
 "service_node": "sn",
 "service_zone": "sz",
 "file_flush_interval": "1.500s",
 "drain_time": "60s",
 "parent_shutdown_time": "90s",
 "mode": "Validate",
 "disable_hot_restart": true,
 "enable_mutex_tracing": true,
 "restart_epoch": 2,
 "cpuset_threads": true,
 "reject_unknown_dynamic_fields": true,
 "log_format_escaped": true,
 "disabled_extensions": ["a/b", "c/d"],
 "ignore_unknown_dynamic_fields": true,
 "use_dynamic_base_id": false,
 "base_id_path": "/tmp/base",
 "drain_strategy": "Immediate",
 "enable_fine_grain_logging": false,
 "socket_path": "/tmp/sock",
 "socket_mode": 420,
 "enable_core_dump": false,
 "stats_tag": ["env:prod", "dc:x:y"],
 "skip_hot_restart_on_no_parent": true,
 "skip_hot_restart_parent_stats": true,
 "skip_deprecated_logs": true,
 "file_flush_min_size": 0,
 "log_stacktrace_single_entry": true
}`},
		{name: "init only, dynamic base id, fine grain", args: []string{
			"--mode", "init_only", "--use-dynamic-base-id", "--enable-fine-grain-logging", "--concurrency", "0",
		}, want: `{"mode": "InitOnly", "use_dynamic_base_id": true, "enable_fine_grain_logging": true,
 "concurrency": 1, "log_level": "info", "log_format": "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v",
 "file_flush_interval": "10s", "drain_time": "600s", "parent_shutdown_time": "900s",
 "socket_path": "@envoy_domain_socket"}`},
		{name: "abstract socket hides mode", args: []string{
			"--concurrency", "2", "--socket-path", "@mine", "--socket-mode", "644",
		}, want: `{"concurrency": 2, "log_level": "info", "log_format": "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v",
 "file_flush_interval": "10s", "drain_time": "600s", "parent_shutdown_time": "900s", "socket_path": "@mine"}`},
		{name: "socket file default mode", args: []string{"--concurrency", "2", "--socket-path", "/s"},
			want: `{"concurrency": 2, "log_level": "info", "log_format": "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v",
 "file_flush_interval": "10s", "drain_time": "600s", "parent_shutdown_time": "900s",
 "socket_path": "/s", "socket_mode": 384}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q) error = %v", tc.args, err)
			}
			want := &adminv3.CommandLineOptions{}
			if err := protojson.Unmarshal([]byte(tc.want), want); err != nil {
				t.Fatalf("protojson.Unmarshal(want) error = %v", err)
			}
			got := o.CommandLineOptions()
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("CommandLineOptions() mismatch (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("CommandLineOptions().Validate() = %v; want nil", err)
			}
		})
	}
}

// TestCommandLineOptionsPrintedFields checks that printing every field, as /server_info does,
// gives exactly the keys of the reference output.
func TestCommandLineOptionsPrintedFields(t *testing.T) {
	o, err := Parse(nil)
	if err != nil {
		t.Fatalf("Parse(nil) error = %v", err)
	}
	out, err := protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true}.Marshal(o.CommandLineOptions())
	if err != nil {
		t.Fatalf("protojson.Marshal error = %v", err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("json.Unmarshal(%s) error = %v", out, err)
	}
	if err := json.Unmarshal(fmt.Appendf(nil, defaultJSON, runtime.NumCPU()), &want); err != nil {
		t.Fatalf("json.Unmarshal(defaultJSON) error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("printed command_line_options mismatch (-want +got):\n%s", diff)
	}
}

func TestCommandLineOptionsDoesNotAlias(t *testing.T) {
	o, err := Parse([]string{"--disable-extensions", "a/b"})
	if err != nil {
		t.Fatalf("Parse error = %v", err)
	}
	clo := o.CommandLineOptions()
	clo.DisabledExtensions[0] = "changed"
	if !slices.Equal(o.DisabledExtensions, []string{"a/b"}) {
		t.Errorf("Options.DisabledExtensions = %q after changing the message; want [a/b]", o.DisabledExtensions)
	}
}
