package options

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// wantDefaults is Envoy's defaults, written out independently of the code under test.
func wantDefaults(args []string) *Options {
	return &Options{
		Args:               args,
		LogLevel:           "info",
		LogFormat:          "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v",
		Concurrency:        uint32(runtime.NumCPU()),
		FileFlushInterval:  10 * time.Second,
		FileFlushMinSizeKB: 64,
		DrainTime:          600 * time.Second,
		ParentShutdownTime: 900 * time.Second,
		SocketPath:         "@envoy_domain_socket",
		MaxStats:           16384,
		MaxObjNameLen:      60,
	}
}

func TestParseDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "nil", args: nil},
		{name: "empty", args: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q) error = %v; want nil", tc.args, err)
			}
			if diff := cmp.Diff(wantDefaults(tc.args), got); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// optionCase is one use of one option: either it parses into the defaults changed by want,
// or it fails with exactly wantErr.
type optionCase struct {
	name    string
	args    []string
	want    func(o *Options)
	wantErr string
}

// optionCases holds, per long option name, a valid use and an invalid one.
var optionCases = map[string][]optionCase{
	"config-path": {
		{name: "long", args: []string{"--config-path", "/etc/envoy.yaml"}, want: func(o *Options) { o.ConfigPath = "/etc/envoy.yaml" }},
		{name: "short", args: []string{"-c", "/etc/envoy.yaml"}, want: func(o *Options) { o.ConfigPath = "/etc/envoy.yaml" }},
		{name: "short equals", args: []string{"-c=/e.yaml"}, want: func(o *Options) { o.ConfigPath = "/e.yaml" }},
		{name: "short one argument", args: []string{"-c /e.yaml"}, want: func(o *Options) { o.ConfigPath = "/e.yaml" }},
		{name: "missing value", args: []string{"-c"}, wantErr: "-c: needs a value"},
	},
	"config-yaml": {
		{name: "valid", args: []string{"--config-yaml", "node: {id: 'a=b c'}"}, want: func(o *Options) { o.ConfigYAML = "node: {id: 'a=b c'}" }},
		{name: "missing value", args: []string{"--config-yaml"}, wantErr: "--config-yaml: needs a value"},
	},
	"mode": {
		{name: "serve", args: []string{"--mode", "serve"}, want: func(o *Options) { o.Mode = ModeServe }},
		{name: "validate", args: []string{"--mode", "validate"}, want: func(o *Options) { o.Mode = ModeValidate }},
		{name: "init_only", args: []string{"--mode=init_only"}, want: func(o *Options) { o.Mode = ModeInitOnly }},
		{name: "invalid", args: []string{"--mode", "bogus"}, wantErr: `--mode = "bogus": must be one of serve, validate, init_only`},
		{name: "case matters", args: []string{"--mode", "Serve"}, wantErr: `--mode = "Serve": must be one of serve, validate, init_only`},
	},
	"admin-address-path": {
		{name: "valid", args: []string{"--admin-address-path", "/tmp/admin"}, want: func(o *Options) { o.AdminAddressPath = "/tmp/admin" }},
		{name: "missing value", args: []string{"--admin-address-path"}, wantErr: "--admin-address-path: needs a value"},
	},
	"local-address-ip-version": {
		{name: "v4", args: []string{"--local-address-ip-version", "v4"}, want: func(o *Options) { o.LocalAddressIPVersion = IPv4 }},
		{name: "v6", args: []string{"--local-address-ip-version", "v6"}, want: func(o *Options) { o.LocalAddressIPVersion = IPv6 }},
		{name: "invalid", args: []string{"--local-address-ip-version", "4"}, wantErr: `--local-address-ip-version = "4": must be one of v4, v6`},
	},
	"base-id": {
		{name: "valid", args: []string{"--base-id", "7"}, want: func(o *Options) { o.BaseID = 7 }},
		{name: "max", args: []string{"--base-id", "4294967295"}, want: func(o *Options) { o.BaseID = 4294967295 }},
		{name: "too large", args: []string{"--base-id", "4294967296"}, wantErr: `--base-id = "4294967296": must be an unsigned 32-bit integer`},
		{name: "not a number", args: []string{"--base-id", "x"}, wantErr: `--base-id = "x": must be an unsigned 32-bit integer`},
	},
	"use-dynamic-base-id": {
		{name: "valid", args: []string{"--use-dynamic-base-id"}, want: func(o *Options) { o.UseDynamicBaseID = true }},
		{name: "with restart epoch", args: []string{"--use-dynamic-base-id", "--restart-epoch", "2"}, wantErr: `--restart-epoch = "2": must be 0 with --use-dynamic-base-id`},
	},
	"base-id-path": {
		{name: "valid", args: []string{"--base-id-path", "/tmp/base"}, want: func(o *Options) { o.BaseIDPath = "/tmp/base" }},
		{name: "missing value", args: []string{"--base-id-path"}, wantErr: "--base-id-path: needs a value"},
	},
	"skip-hot-restart-on-no-parent": {
		{name: "valid", args: []string{"--skip-hot-restart-on-no-parent"}, want: func(o *Options) { o.SkipHotRestartOnNoParent = true }},
		{name: "with value", args: []string{"--skip-hot-restart-on-no-parent=true"}, wantErr: `--skip-hot-restart-on-no-parent = "true": takes no value`},
	},
	"skip-hot-restart-parent-stats": {
		{name: "valid", args: []string{"--skip-hot-restart-parent-stats"}, want: func(o *Options) { o.SkipHotRestartParentStats = true }},
		{name: "twice", args: []string{"--skip-hot-restart-parent-stats", "--skip-hot-restart-parent-stats"}, wantErr: "--skip-hot-restart-parent-stats: given more than once"},
	},
	"concurrency": {
		{name: "valid", args: []string{"--concurrency", "3"}, want: func(o *Options) { o.Concurrency = 3 }},
		{name: "zero is one", args: []string{"--concurrency", "0"}, want: func(o *Options) { o.Concurrency = 1 }},
		{name: "plus sign", args: []string{"--concurrency=+2"}, want: func(o *Options) { o.Concurrency = 2 }},
		{name: "negative", args: []string{"--concurrency", "-1"}, wantErr: `--concurrency = "-1": must be an unsigned 32-bit integer`},
		{name: "next option is the value", args: []string{"--concurrency", "-l", "info"}, wantErr: `--concurrency = "-l": must be an unsigned 32-bit integer`},
		{name: "trailing text", args: []string{"--concurrency", "2x"}, wantErr: `--concurrency = "2x": must be an unsigned 32-bit integer`},
	},
	"cpuset-threads": {
		{name: "valid", args: []string{"--cpuset-threads"}, want: func(o *Options) { o.CpusetThreads = true }},
		{name: "with concurrency", args: []string{"--cpuset-threads", "--concurrency", "2"}, want: func(o *Options) {
			o.CpusetThreads, o.Concurrency = true, 2
			o.Warnings = []string{"Both --concurrency and --cpuset-threads options are set; not applying --cpuset-threads."}
		}},
		{name: "with value", args: []string{"--cpuset-threads=1"}, wantErr: `--cpuset-threads = "1": takes no value`},
	},
	"log-level": {
		{name: "long", args: []string{"--log-level", "debug"}, want: func(o *Options) { o.LogLevel = "debug" }},
		{name: "short", args: []string{"-l", "trace"}, want: func(o *Options) { o.LogLevel = "trace" }},
		{name: "short equals", args: []string{"-l=error"}, want: func(o *Options) { o.LogLevel = "error" }},
		{name: "warn is warning", args: []string{"-l", "warn"}, want: func(o *Options) { o.LogLevel = "warning" }},
		{name: "warning", args: []string{"-l", "warning"}, want: func(o *Options) { o.LogLevel = "warning" }},
		{name: "critical", args: []string{"-l", "critical"}, want: func(o *Options) { o.LogLevel = "critical" }},
		{name: "off", args: []string{"-l", "off"}, want: func(o *Options) { o.LogLevel = "off" }},
		{name: "info", args: []string{"-l", "info"}, want: func(o *Options) { o.LogLevel = "info" }},
		{name: "invalid", args: []string{"-l", "verbose"}, wantErr: `-l = "verbose": must be one of trace, debug, info, warning, warn, error, critical, off`},
		{name: "upper case", args: []string{"--log-level", "INFO"}, wantErr: `--log-level = "INFO": must be one of trace, debug, info, warning, warn, error, critical, off`},
	},
	"component-log-level": {
		{name: "valid", args: []string{"--component-log-level", "upstream:debug,config:warn"}, want: func(o *Options) {
			o.ComponentLogLevel = "upstream:debug,config:warn"
			o.ComponentLogLevels = []ComponentLogLevel{{Name: "upstream", Level: "debug"}, {Name: "config", Level: "warning"}}
		}},
		{name: "empty", args: []string{"--component-log-level", ""}, want: func(o *Options) {}},
		{name: "no level", args: []string{"--component-log-level", "upstream"}, wantErr: `--component-log-level = "upstream": entry "upstream" must be name:level`},
		{name: "trailing comma", args: []string{"--component-log-level", "upstream:debug,"}, wantErr: `--component-log-level = "upstream:debug,": entry "" must be name:level`},
		{name: "two colons", args: []string{"--component-log-level", "a:b:c"}, wantErr: `--component-log-level = "a:b:c": entry "a:b:c" must be name:level`},
		{name: "bad level", args: []string{"--component-log-level", "upstream:loud"}, wantErr: `--component-log-level = "upstream:loud": level "loud" of "upstream" must be one of trace, debug, info, warning, warn, error, critical, off`},
		{name: "with fine grain", args: []string{"--enable-fine-grain-logging", "--component-log-level", "upstream:debug"}, wantErr: `--component-log-level = "upstream:debug": cannot be used with --enable-fine-grain-logging`},
	},
	"log-format": {
		{name: "valid", args: []string{"--log-format", "[%v]"}, want: func(o *Options) { o.LogFormat, o.LogFormatSet = "[%v]", true }},
		{name: "equals inside value", args: []string{"--log-format=%v a=b"}, want: func(o *Options) { o.LogFormat, o.LogFormatSet = "%v a=b", true }},
		{name: "missing value", args: []string{"--log-format"}, wantErr: "--log-format: needs a value"},
	},
	"log-format-escaped": {
		{name: "valid", args: []string{"--log-format-escaped"}, want: func(o *Options) { o.LogFormatEscaped = true }},
		{name: "with value", args: []string{"--log-format-escaped=yes"}, wantErr: `--log-format-escaped = "yes": takes no value`},
	},
	"log-format-prefix-with-location": {
		{name: "true", args: []string{"--log-format", "%v %%v %v", "--log-format-prefix-with-location", "1"}, want: func(o *Options) {
			o.LogFormat, o.LogFormatSet, o.LogFormatPrefixWithLocation = "[%g:%#] %v %%v [%g:%#] %v", true, true
		}},
		{name: "false", args: []string{"--log-format-prefix-with-location", "false"}, want: func(o *Options) {}},
		{name: "invalid", args: []string{"--log-format-prefix-with-location", "yes"}, wantErr: `--log-format-prefix-with-location = "yes": must be one of 0, 1, true, false`},
	},
	"log-path": {
		{name: "valid", args: []string{"--log-path", "/var/log/legate.log"}, want: func(o *Options) { o.LogPath = "/var/log/legate.log" }},
		{name: "missing value", args: []string{"--log-path"}, wantErr: "--log-path: needs a value"},
	},
	"enable-fine-grain-logging": {
		{name: "valid", args: []string{"--enable-fine-grain-logging"}, want: func(o *Options) { o.EnableFineGrainLogging = true }},
		{name: "with empty component levels", args: []string{"--enable-fine-grain-logging", "--component-log-level="}, want: func(o *Options) { o.EnableFineGrainLogging = true }},
		{name: "twice", args: []string{"--enable-fine-grain-logging", "--enable-fine-grain-logging"}, wantErr: "--enable-fine-grain-logging: given more than once"},
	},
	"log-stacktrace-single-entry": {
		{name: "valid", args: []string{"--log-stacktrace-single-entry"}, want: func(o *Options) { o.LogStacktraceSingleEntry = true }},
		{name: "with value", args: []string{"--log-stacktrace-single-entry=1"}, wantErr: `--log-stacktrace-single-entry = "1": takes no value`},
	},
	"restart-epoch": {
		{name: "valid", args: []string{"--restart-epoch", "3"}, want: func(o *Options) { o.RestartEpoch = 3 }},
		{name: "invalid", args: []string{"--restart-epoch", "one"}, wantErr: `--restart-epoch = "one": must be an unsigned 32-bit integer`},
	},
	"hot-restart-version": {
		{name: "valid", args: []string{"--hot-restart-version"}, want: func(o *Options) { o.HotRestartVersion = true }},
		{name: "other options still checked", args: []string{"--hot-restart-version", "--mode", "x"}, wantErr: `--mode = "x": must be one of serve, validate, init_only`},
	},
	"service-cluster": {
		{name: "valid", args: []string{"--service-cluster", "front"}, want: func(o *Options) { o.ServiceCluster = "front" }},
		{name: "twice", args: []string{"--service-cluster", "a", "--service-cluster", "b"}, wantErr: `--service-cluster = "b": given more than once`},
	},
	"service-node": {
		{name: "valid", args: []string{"--service-node", "node-1"}, want: func(o *Options) { o.ServiceNode = "node-1" }},
		{name: "missing value", args: []string{"--service-node"}, wantErr: "--service-node: needs a value"},
	},
	"service-zone": {
		{name: "valid", args: []string{"--service-zone", "us-east-1a"}, want: func(o *Options) { o.ServiceZone = "us-east-1a" }},
		{name: "missing value", args: []string{"--service-zone"}, wantErr: "--service-zone: needs a value"},
	},
	"file-flush-interval-msec": {
		{name: "valid", args: []string{"--file-flush-interval-msec", "1500"}, want: func(o *Options) { o.FileFlushInterval = 1500 * time.Millisecond }},
		{name: "invalid", args: []string{"--file-flush-interval-msec", "1.5"}, wantErr: `--file-flush-interval-msec = "1.5": must be an unsigned 32-bit integer`},
	},
	"file-flush-min-size-kb": {
		{name: "valid", args: []string{"--file-flush-min-size-kb", "0"}, want: func(o *Options) { o.FileFlushMinSizeKB = 0 }},
		{name: "invalid", args: []string{"--file-flush-min-size-kb", ""}, wantErr: `--file-flush-min-size-kb = "": must be an unsigned 32-bit integer`},
	},
	"drain-time-s": {
		{name: "valid", args: []string{"--drain-time-s", "60"}, want: func(o *Options) { o.DrainTime = time.Minute }},
		{name: "invalid", args: []string{"--drain-time-s", "60s"}, wantErr: `--drain-time-s = "60s": must be an unsigned 32-bit integer`},
	},
	"drain-strategy": {
		{name: "gradual", args: []string{"--drain-strategy", "gradual"}, want: func(o *Options) { o.DrainStrategy = DrainGradual }},
		{name: "immediate", args: []string{"--drain-strategy", "immediate"}, want: func(o *Options) { o.DrainStrategy = DrainImmediate }},
		{name: "invalid", args: []string{"--drain-strategy", "now"}, wantErr: `--drain-strategy = "now": must be one of gradual, immediate`},
	},
	"parent-shutdown-time-s": {
		{name: "valid", args: []string{"--parent-shutdown-time-s", "90"}, want: func(o *Options) { o.ParentShutdownTime = 90 * time.Second }},
		{name: "invalid", args: []string{"--parent-shutdown-time-s", "-90"}, wantErr: `--parent-shutdown-time-s = "-90": must be an unsigned 32-bit integer`},
	},
	"disable-hot-restart": {
		{name: "valid", args: []string{"--disable-hot-restart"}, want: func(o *Options) { o.DisableHotRestart = true }},
		{name: "with value", args: []string{"--disable-hot-restart true"}, wantErr: `--disable-hot-restart = "true": takes no value`},
	},
	"enable-mutex-tracing": {
		{name: "valid", args: []string{"--enable-mutex-tracing"}, want: func(o *Options) { o.EnableMutexTracing = true }},
		{name: "twice", args: []string{"--enable-mutex-tracing", "--enable-mutex-tracing"}, wantErr: "--enable-mutex-tracing: given more than once"},
	},
	"allow-unknown-fields": {
		{name: "valid", args: []string{"--allow-unknown-fields"}, want: func(o *Options) {
			o.AllowUnknownStaticFields = true
			o.Warnings = []string{"--allow-unknown-fields is deprecated, use --allow-unknown-static-fields instead."}
		}},
		{name: "deprecation log skipped", args: []string{"--allow-unknown-fields", "--skip-deprecated-logs"}, want: func(o *Options) {
			o.AllowUnknownStaticFields, o.SkipDeprecatedLogs = true, true
		}},
		{name: "with value", args: []string{"--allow-unknown-fields=1"}, wantErr: `--allow-unknown-fields = "1": takes no value`},
	},
	"allow-unknown-static-fields": {
		{name: "valid", args: []string{"--allow-unknown-static-fields"}, want: func(o *Options) { o.AllowUnknownStaticFields = true }},
		{name: "with value", args: []string{"--allow-unknown-static-fields=1"}, wantErr: `--allow-unknown-static-fields = "1": takes no value`},
	},
	"reject-unknown-dynamic-fields": {
		{name: "valid", args: []string{"--reject-unknown-dynamic-fields"}, want: func(o *Options) { o.RejectUnknownDynamicFields = true }},
		{name: "with value", args: []string{"--reject-unknown-dynamic-fields=1"}, wantErr: `--reject-unknown-dynamic-fields = "1": takes no value`},
	},
	"ignore-unknown-dynamic-fields": {
		{name: "valid", args: []string{"--ignore-unknown-dynamic-fields"}, want: func(o *Options) { o.IgnoreUnknownDynamicFields = true }},
		{name: "with value", args: []string{"--ignore-unknown-dynamic-fields=1"}, wantErr: `--ignore-unknown-dynamic-fields = "1": takes no value`},
	},
	"skip-deprecated-logs": {
		{name: "valid", args: []string{"--skip-deprecated-logs"}, want: func(o *Options) { o.SkipDeprecatedLogs = true }},
		{name: "with value", args: []string{"--skip-deprecated-logs=1"}, wantErr: `--skip-deprecated-logs = "1": takes no value`},
	},
	"disable-extensions": {
		{name: "valid", args: []string{"--disable-extensions", "envoy.filters.http/envoy.filters.http.lua,envoy.tracers/envoy.zipkin"}, want: func(o *Options) {
			o.DisabledExtensions = []string{"envoy.filters.http/envoy.filters.http.lua", "envoy.tracers/envoy.zipkin"}
		}},
		{name: "empty", args: []string{"--disable-extensions="}, want: func(o *Options) {}},
		{name: "empty piece kept", args: []string{"--disable-extensions", "a,,b"}, want: func(o *Options) { o.DisabledExtensions = []string{"a", "", "b"} }},
		{name: "missing value", args: []string{"--disable-extensions"}, wantErr: "--disable-extensions: needs a value"},
	},
	"socket-path": {
		{name: "abstract", args: []string{"--socket-path", "@legate"}, want: func(o *Options) { o.SocketPath = "@legate" }},
		{name: "file gets default mode", args: []string{"--socket-path", "/tmp/legate.sock"}, want: func(o *Options) {
			o.SocketPath, o.SocketMode = "/tmp/legate.sock", 0o600
		}},
		{name: "empty", args: []string{"--socket-path="}, wantErr: `--socket-path = "": must not be empty`},
	},
	"socket-mode": {
		{name: "file", args: []string{"--socket-path", "/tmp/s", "--socket-mode", "644"}, want: func(o *Options) {
			o.SocketPath, o.SocketMode = "/tmp/s", 0o644
		}},
		{name: "leading zero", args: []string{"--socket-path", "/tmp/s", "--socket-mode", "0755"}, want: func(o *Options) {
			o.SocketPath, o.SocketMode = "/tmp/s", 0o755
		}},
		{name: "abstract ignores mode", args: []string{"--socket-mode", "999"}, want: func(o *Options) {}},
		{name: "not octal", args: []string{"--socket-path", "/tmp/s", "--socket-mode", "689"}, wantErr: `--socket-mode = "689": must be an octal number such as 644`},
		{name: "empty", args: []string{"--socket-path", "/tmp/s", "--socket-mode", ""}, wantErr: `--socket-mode = "": must be an octal number such as 644`},
	},
	"enable-core-dump": {
		{name: "valid", args: []string{"--enable-core-dump"}, want: func(o *Options) { o.EnableCoreDump = true }},
		{name: "with value", args: []string{"--enable-core-dump=1"}, wantErr: `--enable-core-dump = "1": takes no value`},
	},
	"stats-tag": {
		{name: "repeated", args: []string{"--stats-tag", "env:prod", "--stats-tag=region:us:east"}, want: func(o *Options) {
			o.StatsTags = []StatsTag{{Name: "env", Value: "prod"}, {Name: "region", Value: "us:east"}}
		}},
		{name: "empty name", args: []string{"--stats-tag", ":v"}, want: func(o *Options) { o.StatsTags = []StatsTag{{Name: "", Value: "v"}} }},
		{name: "no colon", args: []string{"--stats-tag", "env"}, wantErr: `--stats-tag = "env": must be name:value`},
		{name: "bad name", args: []string{"--stats-tag", "my-env:prod"}, wantErr: `--stats-tag = "my-env:prod": tag name "my-env" must contain only ASCII letters and digits`},
		{name: "dot in value", args: []string{"--stats-tag", "env:a.b"}, wantErr: `--stats-tag = "env:a.b": tag value "a.b" must not be empty or contain '.'`},
		{name: "empty value", args: []string{"--stats-tag", "env:"}, wantErr: `--stats-tag = "env:": tag value "" must not be empty or contain '.'`},
	},
	"enable-stats-element-scope": {
		{name: "valid", args: []string{"--enable-stats-element-scope"}, want: func(o *Options) { o.EnableStatsElementScope = true }},
		{name: "with value", args: []string{"--enable-stats-element-scope=1"}, wantErr: `--enable-stats-element-scope = "1": takes no value`},
	},
	"bootstrap-version": {
		{name: "valid", args: []string{"--bootstrap-version", "3"}, want: func(o *Options) { o.BootstrapVersion = 3 }},
		{name: "invalid", args: []string{"--bootstrap-version", "v3"}, wantErr: `--bootstrap-version = "v3": must be an unsigned 32-bit integer`},
	},
	"max-stats": {
		{name: "valid", args: []string{"--max-stats", "100000000"}, want: func(o *Options) { o.MaxStats = 100000000 }},
		{name: "too many", args: []string{"--max-stats", "100000001"}, wantErr: `--max-stats = "100000001": must be at most 100000000`},
		{name: "not a number", args: []string{"--max-stats", "many"}, wantErr: `--max-stats = "many": must be an unsigned 64-bit integer`},
	},
	"max-obj-name-len": {
		{name: "valid", args: []string{"--max-obj-name-len", "200"}, want: func(o *Options) { o.MaxObjNameLen = 200 }},
		{name: "below minimum", args: []string{"--max-obj-name-len", "59"}, wantErr: `--max-obj-name-len = "59": must be at least 60`},
		{name: "beyond int", args: []string{"--max-obj-name-len", "18446744073709551615"}, wantErr: `--max-obj-name-len = "18446744073709551615": must be at most 9223372036854775807`},
	},
	"use-fake-symbol-table": {
		{name: "1", args: []string{"--use-fake-symbol-table", "1"}, want: func(o *Options) { o.UseFakeSymbolTable = true }},
		{name: "true", args: []string{"--use-fake-symbol-table=true"}, want: func(o *Options) { o.UseFakeSymbolTable = true }},
		{name: "0", args: []string{"--use-fake-symbol-table", "0"}, want: func(o *Options) {}},
		{name: "false", args: []string{"--use-fake-symbol-table", "false"}, want: func(o *Options) {}},
		{name: "invalid", args: []string{"--use-fake-symbol-table", "on"}, wantErr: `--use-fake-symbol-table = "on": must be one of 0, 1, true, false`},
	},
}

func TestParseOptions(t *testing.T) {
	for long, cases := range optionCases {
		for _, tc := range cases {
			t.Run(long+"/"+tc.name, func(t *testing.T) {
				runOptionCase(t, tc)
			})
		}
	}
}

func runOptionCase(t *testing.T, tc optionCase) {
	t.Helper()
	got, err := Parse(tc.args)
	if tc.wantErr != "" {
		if err == nil {
			t.Fatalf("Parse(%q) = %+v, nil; want error %q", tc.args, got, tc.wantErr)
		}
		if err.Error() != tc.wantErr {
			t.Errorf("Parse(%q) error = %q; want %q", tc.args, err, tc.wantErr)
		}
		var perr *Error
		if !errors.As(err, &perr) {
			t.Errorf("Parse(%q) error type %T; want *Error", tc.args, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Parse(%q) error = %v; want nil", tc.args, err)
	}
	want := wantDefaults(tc.args)
	tc.want(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tc.args, diff)
	}
}

// TestEveryOptionHasCases keeps optionCases in step with the option table: each option needs
// at least one valid and one invalid use.
func TestEveryOptionHasCases(t *testing.T) {
	for _, opt := range optionTable {
		t.Run(opt.long, func(t *testing.T) {
			var valid, invalid int
			for _, tc := range optionCases[opt.long] {
				if tc.wantErr == "" {
					valid++
				} else {
					invalid++
				}
			}
			if valid == 0 || invalid == 0 {
				t.Errorf("optionCases[%q] has %d valid and %d invalid cases; want at least 1 of each", opt.long, valid, invalid)
			}
		})
	}
	for long := range optionCases {
		if lookup("--"+long) == nil {
			t.Errorf("optionCases has %q, which is not an option", long)
		}
	}
}

func TestParseSyntax(t *testing.T) {
	for _, tc := range []optionCase{
		{name: "value in next argument", args: []string{"--service-node", "n"}, want: func(o *Options) { o.ServiceNode = "n" }},
		{name: "value after equals", args: []string{"--service-node=n"}, want: func(o *Options) { o.ServiceNode = "n" }},
		{name: "value after space in one argument", args: []string{"--service-node n"}, want: func(o *Options) { o.ServiceNode = "n" }},
		{name: "empty value after equals", args: []string{"--service-node="}, want: func(o *Options) {}},
		{name: "value starting with dash", args: []string{"--service-node", "-l"}, want: func(o *Options) { o.ServiceNode = "-l" }},
		{name: "value that looks like help", args: []string{"--service-node", "--help"}, want: func(o *Options) { o.ServiceNode = "--help" }},
		{name: "equals before space", args: []string{"--service-node=a b"}, want: func(o *Options) { o.ServiceNode = "a b" }},
		{name: "space before equals", args: []string{"--service-node a=b"}, want: func(o *Options) { o.ServiceNode = "a=b" }},
		{name: "rest ignored after double dash", args: []string{"-l", "debug", "--", "--bogus", "positional"}, want: func(o *Options) { o.LogLevel = "debug" }},
		{name: "rest ignored after ignore_rest", args: []string{"--ignore_rest", "--mode", "bogus"}, want: func(o *Options) {}},
		{name: "many options", args: []string{
			"-c", "/etc/legate.yaml", "--service-cluster", "c", "--service-node", "n", "--service-zone", "z",
			"--concurrency", "4", "-l", "warn", "--mode", "validate", "--drain-strategy", "immediate",
		}, want: func(o *Options) {
			o.ConfigPath, o.ServiceCluster, o.ServiceNode, o.ServiceZone = "/etc/legate.yaml", "c", "n", "z"
			o.Concurrency, o.LogLevel, o.Mode, o.DrainStrategy = 4, "warning", ModeValidate, DrainImmediate
		}},
		{name: "unknown long option", args: []string{"--bogus"}, wantErr: "--bogus: unknown option"},
		{name: "unknown long option with value", args: []string{"--bogus=1"}, wantErr: "--bogus: unknown option"},
		{name: "unknown short option", args: []string{"-x"}, wantErr: "-x: unknown option"},
		{name: "glued short value", args: []string{"-ldebug"}, wantErr: "-ldebug: unknown option"},
		{name: "single dash long name", args: []string{"-config-path", "x"}, wantErr: "-config-path: unknown option"},
		{name: "positional argument", args: []string{"envoy.yaml"}, wantErr: `argument "envoy.yaml": unexpected; legate takes no positional arguments`},
		{name: "lone dash", args: []string{"-"}, wantErr: `argument "-": unexpected; legate takes no positional arguments`},
		{name: "empty argument", args: []string{""}, wantErr: `argument "": unexpected; legate takes no positional arguments`},
		{name: "value given twice", args: []string{"-l", "info", "--log-level", "debug"}, wantErr: `--log-level = "debug": given more than once`},
		{name: "error before help wins", args: []string{"--bogus", "--help"}, wantErr: "--bogus: unknown option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runOptionCase(t, tc)
		})
	}
}

func TestParseHelpAndVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want error
	}{
		{name: "short help", args: []string{"-h"}, want: ErrHelp},
		{name: "long help", args: []string{"--help"}, want: ErrHelp},
		{name: "help before a bad value", args: []string{"--help", "--mode", "bogus"}, want: ErrHelp},
		{name: "help after a bad value", args: []string{"--mode", "bogus", "--help"}, want: ErrHelp},
		{name: "help after double dash", args: []string{"--", "--help"}, want: ErrHelp},
		{name: "version", args: []string{"--version"}, want: ErrVersion},
		{name: "version then help", args: []string{"--version", "--help"}, want: ErrVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.args)
			if !errors.Is(err, tc.want) {
				t.Errorf("Parse(%q) = %v, %v; want nil, %v", tc.args, got, err, tc.want)
			}
		})
	}
}

func TestParseKeepsArgs(t *testing.T) {
	args := []string{"-l", "debug"}
	o, err := Parse(args)
	if err != nil {
		t.Fatalf("Parse(%q) error = %v", args, err)
	}
	args[1] = "changed"
	if diff := cmp.Diff([]string{"-l", "debug"}, o.Args); diff != "" {
		t.Errorf("Options.Args changed with the caller's slice (-want +got):\n%s", diff)
	}
}

func TestCheckComponents(t *testing.T) {
	known := func(name string) bool { return name == "upstream" || name == "config" }
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "none", args: nil},
		{name: "all known", args: []string{"--component-log-level", "upstream:debug,config:trace"}},
		{name: "unknown", args: []string{"--component-log-level", "upstream:debug,bogus:trace"},
			wantErr: `--component-log-level = "upstream:debug,bogus:trace": unknown component "bogus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q) error = %v", tc.args, err)
			}
			err = o.CheckComponents(known)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("CheckComponents() error = %q; want %q", got, tc.wantErr)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	usage := Usage()
	for _, opt := range optionTable {
		t.Run(opt.long, func(t *testing.T) {
			if !strings.Contains(usage, "--"+opt.long) {
				t.Errorf("Usage() does not mention --%s", opt.long)
			}
		})
	}
	for _, want := range []string{"-c, --config-path <path>", "-l, --log-level <level>", "-h, --help", "--version"} {
		if !strings.Contains(usage, want) {
			t.Errorf("Usage() does not contain %q", want)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{name: "serve", got: ModeServe.String(), want: "Serve"},
		{name: "validate", got: ModeValidate.String(), want: "Validate"},
		{name: "init only", got: ModeInitOnly.String(), want: "InitOnly"},
		{name: "bad mode", got: Mode(9).String(), want: "Mode(9)"},
		{name: "gradual", got: DrainGradual.String(), want: "Gradual"},
		{name: "immediate", got: DrainImmediate.String(), want: "Immediate"},
		{name: "bad drain", got: DrainStrategy(-1).String(), want: "DrainStrategy(-1)"},
		{name: "v4", got: IPv4.String(), want: "v4"},
		{name: "v6", got: IPv6.String(), want: "v6"},
		{name: "bad ip", got: IPVersion(2).String(), want: "IPVersion(2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("String() = %q; want %q", tc.got, tc.want)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	args := []string{
		"-c", "/etc/legate.yaml", "--service-cluster", "front", "--service-node", "node-1",
		"--concurrency", "4", "-l", "info", "--drain-strategy=immediate", "--stats-tag", "env:prod",
		"--component-log-level", "upstream:debug,config:trace", "--socket-path", "/tmp/s", "--socket-mode", "644",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(args); err != nil {
			b.Fatal(err)
		}
	}
}
