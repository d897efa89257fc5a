package options

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// kind says how an option takes its value.
type kind int

const (
	// kindSwitch takes no value; giving it sets a bool.
	kindSwitch kind = iota
	// kindValue takes one value and may be given once.
	kindValue
	// kindMulti takes one value and may be repeated (--stats-tag).
	kindMulti
)

// option describes one command-line option. The table below is read-only after package
// initialization.
type option struct {
	long  string // without the leading "--"
	short string // one letter without the leading "-", or ""
	kind  kind
	arg   string // placeholder for the value in Usage; "" for a switch
	help  string
	// apply stores a value as soon as it is read. flag is the spelling used, for errors.
	// A nil apply means the raw value is kept and checked after the whole line is read,
	// in Envoy's order (so "--mode bogus --help" still prints help, as Envoy does).
	apply func(o *Options, flag, value string) error
}

// optionTable lists every option Envoy has accepted, current and legacy, in Usage order.
var optionTable = []option{
	{long: "config-path", short: "c", kind: kindValue, arg: "path",
		help:  "Bootstrap configuration file (.json, .yaml, .pb or .pb_text).",
		apply: setString(func(o *Options) *string { return &o.ConfigPath })},
	{long: "config-yaml", kind: kindValue, arg: "yaml",
		help:  "Inline bootstrap YAML (or JSON), merged over the contents of --config-path.",
		apply: setString(func(o *Options) *string { return &o.ConfigYAML })},
	{long: "mode", kind: kindValue, arg: "serve|validate|init_only",
		help: "serve (default): check the configuration, then serve traffic; validate: check the configuration and exit; init_only: initialize, then exit."},
	{long: "admin-address-path", kind: kindValue, arg: "path",
		help:  "File to which the admin listener's address is written.",
		apply: setString(func(o *Options) *string { return &o.AdminAddressPath })},
	{long: "local-address-ip-version", kind: kindValue, arg: "v4|v6",
		help: "IP version of the server's local address (default v4)."},
	{long: "base-id", kind: kindValue, arg: "uint32",
		help:  "Base ID of the hot-restart shared memory and sockets, so several servers can share a host (default 0).",
		apply: setUint32(func(o *Options) *uint32 { return &o.BaseID })},
	{long: "use-dynamic-base-id", kind: kindSwitch,
		help:  "Pick an unused base ID; overrides --base-id and needs --restart-epoch 0.",
		apply: setSwitch(func(o *Options) *bool { return &o.UseDynamicBaseID })},
	{long: "base-id-path", kind: kindValue, arg: "path",
		help:  "File to which the base ID in use is written.",
		apply: setString(func(o *Options) *string { return &o.BaseIDPath })},
	{long: "skip-hot-restart-on-no-parent", kind: kindSwitch,
		help:  "With --restart-epoch > 0, start normally when the parent cannot be reached instead of failing.",
		apply: setSwitch(func(o *Options) *bool { return &o.SkipHotRestartOnNoParent })},
	{long: "skip-hot-restart-parent-stats", kind: kindSwitch,
		help:  "During a hot restart, do not copy the parent's stats.",
		apply: setSwitch(func(o *Options) *bool { return &o.SkipHotRestartParentStats })},
	{long: "concurrency", kind: kindValue, arg: "uint32",
		help:  "Number of worker threads (default: the number of CPUs; 0 means 1).",
		apply: setUint32(func(o *Options) *uint32 { return &o.Concurrency })},
	{long: "cpuset-threads", kind: kindSwitch,
		help:  "Without --concurrency, size the workers from the process's cpuset.",
		apply: setSwitch(func(o *Options) *bool { return &o.CpusetThreads })},
	{long: "log-level", short: "l", kind: kindValue, arg: "level",
		help: "Log level: trace, debug, info (default), warning (or warn), error, critical or off."},
	{long: "component-log-level", kind: kindValue, arg: "name:level,...",
		help: "Per-component log levels, for example upstream:debug,config:trace."},
	{long: "log-format", kind: kindValue, arg: "format",
		help: "Log line format in spdlog syntax (default \"" + DefaultLogFormat + "\")."},
	{long: "log-format-escaped", kind: kindSwitch,
		help:  "Escape C-style escape sequences in log messages.",
		apply: setSwitch(func(o *Options) *bool { return &o.LogFormatEscaped })},
	{long: "log-format-prefix-with-location", kind: kindValue, arg: "bool",
		help:  "Legacy: when true, prefix each %v of the log format with \"[%g:%#] \".",
		apply: setBool(func(o *Options) *bool { return &o.LogFormatPrefixWithLocation })},
	{long: "log-path", kind: kindValue, arg: "path",
		help:  "Log file (default: standard error); reopened on SIGUSR1.",
		apply: setString(func(o *Options) *string { return &o.LogPath })},
	{long: "enable-fine-grain-logging", kind: kindSwitch,
		help:  "Per-file log levels; cannot be combined with --component-log-level.",
		apply: setSwitch(func(o *Options) *bool { return &o.EnableFineGrainLogging })},
	{long: "log-stacktrace-single-entry", kind: kindSwitch,
		help:  "Log a stack trace as one log entry instead of one entry per frame.",
		apply: setSwitch(func(o *Options) *bool { return &o.LogStacktraceSingleEntry })},
	{long: "restart-epoch", kind: kindValue, arg: "uint32",
		help:  "Hot-restart epoch: how many times the server has been hot restarted (default 0).",
		apply: setUint32(func(o *Options) *uint32 { return &o.RestartEpoch })},
	{long: "hot-restart-version", kind: kindSwitch,
		help:  "Print the hot-restart compatibility version and exit.",
		apply: setSwitch(func(o *Options) *bool { return &o.HotRestartVersion })},
	{long: "service-cluster", kind: kindValue, arg: "name",
		help:  "Local service cluster; overrides the bootstrap node.cluster.",
		apply: setString(func(o *Options) *string { return &o.ServiceCluster })},
	{long: "service-node", kind: kindValue, arg: "name",
		help:  "Local service node; overrides the bootstrap node.id.",
		apply: setString(func(o *Options) *string { return &o.ServiceNode })},
	{long: "service-zone", kind: kindValue, arg: "name",
		help:  "Local service zone; overrides the bootstrap node.locality.zone.",
		apply: setString(func(o *Options) *string { return &o.ServiceZone })},
	{long: "file-flush-interval-msec", kind: kindValue, arg: "uint32",
		help:  "Interval between flushes of buffered files such as access logs, in milliseconds (default 10000).",
		apply: setDuration(func(o *Options) *time.Duration { return &o.FileFlushInterval }, time.Millisecond)},
	{long: "file-flush-min-size-kb", kind: kindValue, arg: "uint32",
		help:  "Buffered bytes, in KiB, that trigger a file flush before the interval ends (default 64).",
		apply: setUint32(func(o *Options) *uint32 { return &o.FileFlushMinSizeKB })},
	{long: "drain-time-s", kind: kindValue, arg: "uint32",
		help:  "Drain time in seconds for hot restart and listener removal (default 600).",
		apply: setDuration(func(o *Options) *time.Duration { return &o.DrainTime }, time.Second)},
	{long: "drain-strategy", kind: kindValue, arg: "gradual|immediate",
		help: "gradual (default): drain a growing share of requests over the drain time; immediate: drain all at once."},
	{long: "parent-shutdown-time-s", kind: kindValue, arg: "uint32",
		help:  "Seconds before the hot-restart parent is shut down (default 900).",
		apply: setDuration(func(o *Options) *time.Duration { return &o.ParentShutdownTime }, time.Second)},
	{long: "disable-hot-restart", kind: kindSwitch,
		help:  "Disable hot restart.",
		apply: setSwitch(func(o *Options) *bool { return &o.DisableHotRestart })},
	{long: "enable-mutex-tracing", kind: kindSwitch,
		help:  "Collect mutex contention statistics (shown by /contention).",
		apply: setSwitch(func(o *Options) *bool { return &o.EnableMutexTracing })},
	{long: "allow-unknown-fields", kind: kindSwitch,
		help: "Deprecated spelling of --allow-unknown-static-fields."},
	{long: "allow-unknown-static-fields", kind: kindSwitch,
		help:  "Accept unknown fields in the bootstrap instead of rejecting it.",
		apply: setSwitch(func(o *Options) *bool { return &o.AllowUnknownStaticFields })},
	{long: "reject-unknown-dynamic-fields", kind: kindSwitch,
		help:  "Reject dynamic (xDS) resources with unknown fields.",
		apply: setSwitch(func(o *Options) *bool { return &o.RejectUnknownDynamicFields })},
	{long: "ignore-unknown-dynamic-fields", kind: kindSwitch,
		help:  "Accept unknown fields in dynamic resources without warning or counting them.",
		apply: setSwitch(func(o *Options) *bool { return &o.IgnoreUnknownDynamicFields })},
	{long: "skip-deprecated-logs", kind: kindSwitch,
		help:  "Do not log warnings about deprecated configuration fields.",
		apply: setSwitch(func(o *Options) *bool { return &o.SkipDeprecatedLogs })},
	{long: "disable-extensions", kind: kindValue, arg: "category/name,...",
		help: "Comma-separated extensions to disable."},
	{long: "socket-path", kind: kindValue, arg: "path",
		help: "Hot-restart socket path (default \"" + DefaultSocketPath + "\"; a leading '@' means the abstract namespace)."},
	{long: "socket-mode", kind: kindValue, arg: "octal",
		help: "Permission of the hot-restart socket file, in octal (default 600); ignored for abstract sockets."},
	{long: "enable-core-dump", kind: kindSwitch,
		help:  "Allow core dumps (Linux prctl PR_SET_DUMPABLE).",
		apply: setSwitch(func(o *Options) *bool { return &o.EnableCoreDump })},
	{long: "stats-tag", kind: kindMulti, arg: "name:value",
		help: "Tag added to every stat; repeatable. The name is letters and digits; the value is not empty and has no '.'."},
	{long: "enable-stats-element-scope", kind: kindSwitch,
		help:  "Use the element-based stats scope implementation.",
		apply: setSwitch(func(o *Options) *bool { return &o.EnableStatsElementScope })},
	{long: "bootstrap-version", kind: kindValue, arg: "uint32",
		help:  "Legacy: bootstrap API version; accepted and ignored.",
		apply: setUint32(func(o *Options) *uint32 { return &o.BootstrapVersion })},
	{long: "max-stats", kind: kindValue, arg: "uint64",
		help: "Legacy: maximum number of stats (default 16384, at most 100000000); accepted and ignored.",
		apply: func(o *Options, flag, value string) error {
			n, err := parseUint(flag, value, 64)
			o.MaxStats = n
			return err
		}},
	{long: "max-obj-name-len", kind: kindValue, arg: "uint64",
		help: "Legacy: maximum length of a listener, route configuration or cluster name (default and minimum 60).",
		apply: func(o *Options, flag, value string) error {
			n, err := parseUint(flag, value, 64)
			if err == nil && n > math.MaxInt {
				return valueError(flag, value, "must be at most "+strconv.Itoa(math.MaxInt))
			}
			o.MaxObjNameLen = int(n)
			return err
		}},
	{long: "use-fake-symbol-table", kind: kindValue, arg: "bool",
		help:  "Legacy: use the fake stats symbol table (0, 1, true or false); accepted and ignored.",
		apply: setBool(func(o *Options) *bool { return &o.UseFakeSymbolTable })},
}

// lookup finds the option spelled flag ("--name" or "-x").
func lookup(flag string) *option {
	long, isLong := strings.CutPrefix(flag, "--")
	for i := range optionTable {
		opt := &optionTable[i]
		if isLong && opt.long == long || !isLong && opt.short != "" && flag == "-"+opt.short {
			return opt
		}
	}
	return nil
}

func setString(field func(*Options) *string) func(*Options, string, string) error {
	return func(o *Options, _, value string) error {
		*field(o) = value
		return nil
	}
}

func setSwitch(field func(*Options) *bool) func(*Options, string, string) error {
	return func(o *Options, _, _ string) error {
		*field(o) = true
		return nil
	}
}

func setUint32(field func(*Options) *uint32) func(*Options, string, string) error {
	return func(o *Options, flag, value string) error {
		n, err := parseUint(flag, value, 32)
		*field(o) = uint32(n)
		return err
	}
}

func setDuration(field func(*Options) *time.Duration, unit time.Duration) func(*Options, string, string) error {
	return func(o *Options, flag, value string) error {
		n, err := parseUint(flag, value, 32)
		*field(o) = time.Duration(n) * unit
		return err
	}
}

// setBool reads a TCLAP bool value. Envoy's parser takes only 0 and 1; Legate also takes
// true and false.
func setBool(field func(*Options) *bool) func(*Options, string, string) error {
	return func(o *Options, flag, value string) error {
		switch value {
		case "1", "true":
			*field(o) = true
		case "0", "false":
			*field(o) = false
		default:
			return valueError(flag, value, "must be one of 0, 1, true, false")
		}
		return nil
	}
}

// parseUint reads an unsigned decimal number of the given bit size: digits with an optional
// leading '+'. (Envoy's stream parsing also wraps negative numbers around; Legate refuses them.)
func parseUint(flag, value string, bits int) (uint64, error) {
	digits := strings.TrimPrefix(value, "+")
	if digits == "" || digits[0] < '0' || digits[0] > '9' {
		return 0, valueError(flag, value, "must be an unsigned "+strconv.Itoa(bits)+"-bit integer")
	}
	n, err := strconv.ParseUint(digits, 10, bits)
	if err != nil {
		return 0, valueError(flag, value, "must be an unsigned "+strconv.Itoa(bits)+"-bit integer")
	}
	return n, nil
}

// Usage returns the help text printed for -h/--help.
func Usage() string {
	var b strings.Builder
	b.WriteString("Usage: legate [options]\n\n")
	b.WriteString("Legate reads Envoy's command line. A value may follow its option as the next\n")
	b.WriteString("argument (--mode validate), after '=' (--mode=validate), or after a space in the\n")
	b.WriteString("same argument (\"--mode validate\").\n\nOptions:\n")
	for _, opt := range optionTable {
		b.WriteString("  ")
		if opt.short != "" {
			b.WriteString("-" + opt.short + ", ")
		}
		b.WriteString("--" + opt.long)
		if opt.arg != "" {
			b.WriteString(" <" + opt.arg + ">")
		}
		b.WriteString("\n      " + opt.help + "\n")
	}
	b.WriteString("  -h, --help\n      Print this text and exit.\n")
	b.WriteString("  --version\n      Print the version and exit.\n")
	b.WriteString("  --, --ignore_rest\n      Ignore the arguments that follow.\n")
	return b.String()
}
