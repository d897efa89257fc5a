package options

import (
	"errors"
	"fmt"
	"time"
)

// Mode is the server mode chosen with --mode (Envoy's Server::Mode).
// The zero value is ModeServe, Envoy's default.
type Mode int

const (
	// ModeServe validates the configuration and then serves traffic ("serve").
	ModeServe Mode = iota
	// ModeValidate validates the configuration and exits ("validate").
	ModeValidate
	// ModeInitOnly initializes the server and exits before serving ("init_only").
	ModeInitOnly
)

// String returns the name used by the CommandLineOptions.Mode enum: "Serve", "Validate" or
// "InitOnly".
func (m Mode) String() string {
	return enumName("Mode", int(m), "Serve", "Validate", "InitOnly")
}

// DrainStrategy is the hot-restart drain behaviour chosen with --drain-strategy (Envoy's
// Server::DrainStrategy). The zero value is DrainGradual, Envoy's default.
type DrainStrategy int

const (
	// DrainGradual encourages a growing share of requests to drain over the drain time ("gradual").
	DrainGradual DrainStrategy = iota
	// DrainImmediate encourages every request to drain as soon as draining starts ("immediate").
	DrainImmediate
)

// String returns the name used by the CommandLineOptions.DrainStrategy enum: "Gradual" or
// "Immediate".
func (d DrainStrategy) String() string {
	return enumName("DrainStrategy", int(d), "Gradual", "Immediate")
}

// IPVersion is the local address family chosen with --local-address-ip-version.
// The zero value is IPv4, Envoy's default.
type IPVersion int

const (
	// IPv4 is "v4".
	IPv4 IPVersion = iota
	// IPv6 is "v6".
	IPv6
)

// String returns "v4" or "v6", the spelling of both the option value and the
// CommandLineOptions.IpVersion enum.
func (v IPVersion) String() string {
	return enumName("IPVersion", int(v), "v4", "v6")
}

// enumName returns names[v], or "typ(v)" for a value out of range.
func enumName(typ string, v int, names ...string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// ComponentLogLevel is one "name:level" entry of --component-log-level.
type ComponentLogLevel struct {
	// Name is the logger (component) name, for example "upstream".
	Name string
	// Level is the canonical level name: "warn" is stored as "warning".
	Level string
}

// StatsTag is one --stats-tag "name:value" pair: a tag added to every stat.
type StatsTag struct {
	Name  string
	Value string
}

// Default values, as in Envoy.
const (
	// DefaultLogLevel is the level used without -l/--log-level.
	DefaultLogLevel = "info"
	// DefaultLogFormat is Envoy's Logger::DEFAULT_LOG_FORMAT (spdlog pattern syntax).
	DefaultLogFormat = "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v"
	// DefaultSocketPath is the hot-restart socket in the abstract namespace.
	DefaultSocketPath = "@envoy_domain_socket"
	// DefaultSocketMode is --socket-mode 600 (octal).
	DefaultSocketMode = 0o600
	// DefaultFileFlushInterval is --file-flush-interval-msec 10000.
	DefaultFileFlushInterval = 10 * time.Second
	// DefaultFileFlushMinSizeKB is --file-flush-min-size-kb 64.
	DefaultFileFlushMinSizeKB = 64
	// DefaultDrainTime is --drain-time-s 600.
	DefaultDrainTime = 600 * time.Second
	// DefaultParentShutdownTime is --parent-shutdown-time-s 900.
	DefaultParentShutdownTime = 900 * time.Second
	// DefaultMaxStats is the legacy --max-stats default.
	DefaultMaxStats = 16384
	// DefaultMaxObjNameLen is the legacy --max-obj-name-len default, which is also its minimum.
	DefaultMaxObjNameLen = 60
)

// Options is the parsed command line. Each field names the option it comes from; a field
// holds Envoy's default when its option is absent. Durations given in seconds or milliseconds
// on the command line are time.Duration here.
//
// An Options is a plain value built by Parse; it is safe for concurrent reads and is never
// changed by this package after Parse returns.
type Options struct {
	// Args is the argument list exactly as given to Parse (without the program name).
	Args []string

	// ConfigPath is -c/--config-path: the bootstrap file.
	ConfigPath string
	// ConfigYAML is --config-yaml: inline bootstrap YAML merged over ConfigPath's contents.
	ConfigYAML string
	// Mode is --mode (serve, validate, init_only).
	Mode Mode
	// BootstrapVersion is the legacy --bootstrap-version (0 when absent); accepted and unused.
	BootstrapVersion uint32

	// AllowUnknownStaticFields is --allow-unknown-static-fields, or its deprecated spelling
	// --allow-unknown-fields.
	AllowUnknownStaticFields bool
	// RejectUnknownDynamicFields is --reject-unknown-dynamic-fields.
	RejectUnknownDynamicFields bool
	// IgnoreUnknownDynamicFields is --ignore-unknown-dynamic-fields.
	IgnoreUnknownDynamicFields bool
	// SkipDeprecatedLogs is --skip-deprecated-logs.
	SkipDeprecatedLogs bool
	// DisabledExtensions is --disable-extensions split on ','; nil when absent or empty.
	DisabledExtensions []string

	// AdminAllowedHosts is not a command-line option (Envoy has none, and a
	// command line must stay valid for Envoy): the caller fills it from the
	// environment variable admin.AllowedHostsEnv. It lists the extra Host
	// names the admin answers.
	AdminAllowedHosts []string

	// AdminAddressPath is --admin-address-path: where the admin address is written.
	AdminAddressPath string
	// LocalAddressIPVersion is --local-address-ip-version (v4 or v6).
	LocalAddressIPVersion IPVersion

	// LogLevel is -l/--log-level as a canonical level name (trace, debug, info, warning, error,
	// critical, off); "warn" is stored as "warning". Default "info".
	LogLevel string
	// ComponentLogLevel is --component-log-level exactly as given ("" when absent).
	ComponentLogLevel string
	// ComponentLogLevels is ComponentLogLevel parsed, in the order given. The component names
	// are checked only by CheckComponents, since the logger registry lives elsewhere.
	ComponentLogLevels []ComponentLogLevel
	// LogFormat is --log-format (default DefaultLogFormat).
	LogFormat string
	// LogFormatSet reports whether --log-format was given; Envoy refuses a bootstrap
	// application_log_config format when it was.
	LogFormatSet bool
	// LogFormatEscaped is --log-format-escaped.
	LogFormatEscaped bool
	// LogFormatPrefixWithLocation is the legacy --log-format-prefix-with-location. When set to
	// true, each "%v" of LogFormat has already been prefixed with "[%g:%#] " by Parse. When
	// absent nothing is changed, as in current Envoy, whose default format has the location.
	LogFormatPrefixWithLocation bool
	// LogPath is --log-path ("" means standard error).
	LogPath string
	// EnableFineGrainLogging is --enable-fine-grain-logging (per-file loggers).
	EnableFineGrainLogging bool
	// LogStacktraceSingleEntry is --log-stacktrace-single-entry.
	LogStacktraceSingleEntry bool

	// ServiceCluster is --service-cluster; it overrides the bootstrap node.cluster.
	ServiceCluster string
	// ServiceNode is --service-node; it overrides the bootstrap node.id.
	ServiceNode string
	// ServiceZone is --service-zone; it overrides the bootstrap node.locality.zone.
	ServiceZone string

	// Concurrency is the number of workers: --concurrency, or the CPU count when absent
	// (runtime.NumCPU, which honours the CPU affinity mask, so --cpuset-threads gives the same
	// number). 0 becomes 1, as in Envoy.
	Concurrency uint32
	// CpusetThreads is --cpuset-threads.
	CpusetThreads bool

	// FileFlushInterval is --file-flush-interval-msec (default 10s).
	FileFlushInterval time.Duration
	// FileFlushMinSizeKB is --file-flush-min-size-kb (default 64).
	FileFlushMinSizeKB uint32
	// DrainTime is --drain-time-s (default 600s).
	DrainTime time.Duration
	// DrainStrategy is --drain-strategy (gradual or immediate).
	DrainStrategy DrainStrategy
	// ParentShutdownTime is --parent-shutdown-time-s (default 900s).
	ParentShutdownTime time.Duration

	// BaseID is --base-id: the hot-restart shared memory and socket base ID.
	BaseID uint32
	// UseDynamicBaseID is --use-dynamic-base-id; it may not be combined with RestartEpoch > 0.
	UseDynamicBaseID bool
	// BaseIDPath is --base-id-path: where the base ID is written.
	BaseIDPath string
	// RestartEpoch is --restart-epoch.
	RestartEpoch uint32
	// HotRestartVersion is --hot-restart-version: the caller prints the hot-restart
	// compatibility version and exits 0 instead of serving. Parse has validated the rest first.
	HotRestartVersion bool
	// DisableHotRestart is --disable-hot-restart.
	DisableHotRestart bool
	// SkipHotRestartOnNoParent is --skip-hot-restart-on-no-parent.
	SkipHotRestartOnNoParent bool
	// SkipHotRestartParentStats is --skip-hot-restart-parent-stats.
	SkipHotRestartParentStats bool
	// SocketPath is --socket-path (default "@envoy_domain_socket"; '@' is the abstract namespace).
	SocketPath string
	// SocketMode is the permission of the hot-restart socket file: --socket-mode read as octal
	// (default 0o600), and 0 when SocketPath is abstract (starts with '@'), as in Envoy.
	SocketMode uint32

	// EnableMutexTracing is --enable-mutex-tracing (feeds /contention).
	EnableMutexTracing bool
	// EnableCoreDump is --enable-core-dump.
	EnableCoreDump bool
	// StatsTags is every --stats-tag, in the order given.
	StatsTags []StatsTag
	// EnableStatsElementScope is --enable-stats-element-scope.
	EnableStatsElementScope bool
	// MaxStats is the legacy --max-stats (default 16384, at most 100000000); accepted and unused.
	MaxStats uint64
	// MaxObjNameLen is the legacy --max-obj-name-len (default and minimum 60).
	MaxObjNameLen int
	// UseFakeSymbolTable is the legacy --use-fake-symbol-table (0, 1, true or false).
	UseFakeSymbolTable bool

	// Warnings are the messages Envoy logs while reading these options (a deprecated spelling,
	// --concurrency overriding --cpuset-threads). The caller logs them once logging is set up.
	Warnings []string
}

// ErrHelp is returned by Parse for -h/--help. The caller prints Usage() and exits 0.
var ErrHelp = errors.New("options: help requested")

// ErrVersion is returned by Parse for --version. The caller prints the version and exits 0.
var ErrVersion = errors.New("options: version requested")

// Error is an invalid command line: an unknown option, a missing or malformed value, or a
// value that breaks a rule. Its message names the option as spelled, the value and the rule,
// for example `--mode = "bogus": must be one of serve, validate, init_only`.
type Error struct {
	// Option is the option as spelled on the command line ("--mode", "-l"), or "" for a stray
	// argument that is not an option.
	Option string
	// Value is the offending value; meaningful only when HasValue is set.
	Value string
	// HasValue reports whether the message quotes Value.
	HasValue bool
	// Rule says what is wrong or what is required.
	Rule string
}

func (e *Error) Error() string {
	switch {
	case e.Option == "":
		return fmt.Sprintf("argument %q: %s", e.Value, e.Rule)
	case e.HasValue:
		return fmt.Sprintf("%s = %q: %s", e.Option, e.Value, e.Rule)
	default:
		return e.Option + ": " + e.Rule
	}
}

// valueError builds the Error for a value that breaks a rule.
func valueError(option, value, rule string) *Error {
	return &Error{Option: option, Value: value, HasValue: true, Rule: rule}
}
