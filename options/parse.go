package options

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// logLevels are spdlog's level names in enum order, as Envoy accepts them (plus "warn").
var logLevels = []string{"trace", "debug", "info", "warning", "error", "critical", "off"}

const logLevelRule = "must be one of trace, debug, info, warning, warn, error, critical, off"

// maxStatsLimit is the largest legacy --max-stats Envoy accepted.
const maxStatsLimit = 100_000_000

// Parse reads the command line args (without the program name) the way Envoy does and
// returns the options with Envoy's defaults filled in.
//
// Options are read left to right. "-h"/"--help" returns ErrHelp and "--version" returns
// ErrVersion at once, unless an earlier argument was already malformed. An option's value
// is the next argument even when it starts with '-'; "--name=value" and, as with Envoy's
// parser, "--name value" in a single argument also work, as do "-c=path" and "-l=level".
// "--" (or "--ignore_rest") makes Parse ignore the arguments after it. Giving an option
// twice is an error, except --stats-tag. Rules that involve a value's meaning (mode names,
// log levels, incompatible options) are checked after the whole line is read, in Envoy's
// order. Every other error is an *Error.
func Parse(args []string) (*Options, error) {
	p := parser{
		o:     defaults(args),
		given: make(map[string]string),
		raw:   make(map[string]string),
	}
	ignoring := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch arg {
		case "-h", "--help":
			return nil, ErrHelp
		case "--version":
			return nil, ErrVersion
		case "--", "--ignore_rest":
			ignoring = true
			continue
		}
		if ignoring {
			continue
		}
		flag, value, inline := splitArg(arg)
		if flag == "" {
			return nil, &Error{Value: arg, Rule: "unexpected; legate takes no positional arguments"}
		}
		opt := lookup(flag)
		if opt == nil {
			return nil, &Error{Option: flag, Rule: "unknown option"}
		}
		if opt.kind != kindSwitch && !inline {
			if i+1 == len(args) {
				return nil, &Error{Option: flag, Rule: "needs a value"}
			}
			i++
			value = args[i]
		}
		if err := p.take(opt, flag, value, inline); err != nil {
			return nil, err
		}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.o, nil
}

// defaults returns Envoy's defaults for every option.
func defaults(args []string) *Options {
	return &Options{
		Args:               slices.Clone(args),
		LogLevel:           DefaultLogLevel,
		LogFormat:          DefaultLogFormat,
		Concurrency:        uint32(runtime.NumCPU()),
		FileFlushInterval:  DefaultFileFlushInterval,
		FileFlushMinSizeKB: DefaultFileFlushMinSizeKB,
		DrainTime:          DefaultDrainTime,
		ParentShutdownTime: DefaultParentShutdownTime,
		SocketPath:         DefaultSocketPath,
		MaxStats:           DefaultMaxStats,
		MaxObjNameLen:      DefaultMaxObjNameLen,
	}
}

// splitArg splits one argument into the option spelling and an inline value. An inline value
// follows the first '=' or ' ' of a long option, or the '=' or ' ' right after a one-letter
// option. flag is "" for an argument that is not an option at all.
func splitArg(arg string) (flag, value string, inline bool) {
	switch {
	case strings.HasPrefix(arg, "--"):
		if cut := strings.IndexAny(arg[2:], "= "); cut >= 0 {
			return arg[:2+cut], arg[3+cut:], true
		}
		return arg, "", false
	case len(arg) >= 2 && arg[0] == '-':
		if len(arg) > 2 && (arg[2] == '=' || arg[2] == ' ') {
			return arg[:2], arg[3:], true
		}
		return arg, "", false
	}
	return "", "", false
}

// parser holds the state of one Parse call.
type parser struct {
	o *Options
	// given maps the long name of every option seen to the spelling used.
	given map[string]string
	// raw maps the long name of an option checked by finish to its value.
	raw map[string]string
	// statsTags are the --stats-tag values, in order.
	statsTags []string
}

// take records one option occurrence.
func (p *parser) take(opt *option, flag, value string, inline bool) error {
	if opt.kind == kindSwitch && inline {
		return valueError(flag, value, "takes no value")
	}
	if _, seen := p.given[opt.long]; seen && opt.kind != kindMulti {
		if opt.kind == kindSwitch {
			return &Error{Option: flag, Rule: "given more than once"}
		}
		return valueError(flag, value, "given more than once")
	}
	p.given[opt.long] = flag
	switch {
	case opt.kind == kindMulti:
		p.statsTags = append(p.statsTags, value)
	case opt.apply != nil:
		return opt.apply(p.o, flag, value)
	default:
		p.raw[opt.long] = value
	}
	return nil
}

// finish applies the checks Envoy makes once the line is read, in Envoy's order.
func (p *parser) finish() error {
	o := p.o
	if o.MaxObjNameLen < DefaultMaxObjNameLen {
		return valueError(p.given["max-obj-name-len"], strconv.Itoa(o.MaxObjNameLen),
			fmt.Sprintf("must be at least %d", DefaultMaxObjNameLen))
	}
	if o.MaxStats > maxStatsLimit {
		return valueError(p.given["max-stats"], strconv.FormatUint(o.MaxStats, 10),
			fmt.Sprintf("must be at most %d", maxStatsLimit))
	}
	if v, ok := p.raw["log-level"]; ok {
		level, ok := canonicalLevel(v)
		if !ok {
			return valueError(p.given["log-level"], v, logLevelRule)
		}
		o.LogLevel = level
	}
	if v, ok := p.raw["log-format"]; ok {
		o.LogFormat, o.LogFormatSet = v, true
	}
	if o.LogFormatPrefixWithLocation {
		o.LogFormat = prefixWithLocation(o.LogFormat)
	}
	if err := p.componentLogLevels(); err != nil {
		return err
	}
	// The value order of each choice is the order of the Go enum.
	mode, err := p.choice("mode", "serve", "validate", "init_only")
	if err != nil {
		return err
	}
	if mode >= 0 {
		o.Mode = Mode(mode)
	}
	ipVersion, err := p.choice("local-address-ip-version", "v4", "v6")
	if err != nil {
		return err
	}
	if ipVersion >= 0 {
		o.LocalAddressIPVersion = IPVersion(ipVersion)
	}
	if o.UseDynamicBaseID && o.RestartEpoch > 0 {
		return valueError(p.given["restart-epoch"], strconv.FormatUint(uint64(o.RestartEpoch), 10),
			"must be 0 with --use-dynamic-base-id")
	}
	if _, set := p.given["concurrency"]; set && o.CpusetThreads {
		o.Warnings = append(o.Warnings,
			"Both --concurrency and --cpuset-threads options are set; not applying --cpuset-threads.")
	}
	o.Concurrency = max(1, o.Concurrency)
	if _, set := p.given["allow-unknown-fields"]; set {
		o.AllowUnknownStaticFields = true
		if !o.SkipDeprecatedLogs {
			o.Warnings = append(o.Warnings,
				"--allow-unknown-fields is deprecated, use --allow-unknown-static-fields instead.")
		}
	}
	if err := p.socket(); err != nil {
		return err
	}
	drain, err := p.choice("drain-strategy", "gradual", "immediate")
	if err != nil {
		return err
	}
	if drain >= 0 {
		o.DrainStrategy = DrainStrategy(drain)
	}
	if v := p.raw["disable-extensions"]; v != "" {
		o.DisabledExtensions = strings.Split(v, ",")
	}
	return p.parseStatsTags()
}

// canonicalLevel maps a level name to spdlog's spelling ("warn" → "warning").
func canonicalLevel(name string) (string, bool) {
	if name == "warn" {
		return "warning", true
	}
	if slices.Contains(logLevels, name) {
		return name, true
	}
	return "", false
}

// prefixWithLocation puts "[%g:%#] " before every "%v" of an spdlog pattern, leaving the
// escaped "%%" alone, as the legacy --log-format-prefix-with-location did.
func prefixWithLocation(format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] == '%' && i+1 < len(format) {
			if format[i+1] == 'v' {
				b.WriteString("[%g:%#] ")
			}
			b.WriteString(format[i : i+2])
			i++
			continue
		}
		b.WriteByte(format[i])
	}
	return b.String()
}

// componentLogLevels checks --component-log-level: comma-separated name:level pairs.
func (p *parser) componentLogLevels() error {
	v := p.raw["component-log-level"]
	if v == "" {
		return nil
	}
	flag := p.given["component-log-level"]
	if p.o.EnableFineGrainLogging {
		return valueError(flag, v, "cannot be used with --enable-fine-grain-logging")
	}
	p.o.ComponentLogLevel = v
	for entry := range strings.SplitSeq(v, ",") {
		parts := strings.Split(entry, ":")
		if len(parts) != 2 {
			return valueError(flag, v, fmt.Sprintf("entry %q must be name:level", entry))
		}
		level, ok := canonicalLevel(parts[1])
		if !ok {
			return valueError(flag, v, fmt.Sprintf("level %q of %q %s", parts[1], parts[0], logLevelRule))
		}
		p.o.ComponentLogLevels = append(p.o.ComponentLogLevels, ComponentLogLevel{Name: parts[0], Level: level})
	}
	return nil
}

// choice reads the option long, whose value must be one of names, and returns the index of
// the value; it returns -1 when the option was not given.
func (p *parser) choice(long string, names ...string) (int, error) {
	v, ok := p.raw[long]
	if !ok {
		return -1, nil
	}
	if i := slices.Index(names, v); i >= 0 {
		return i, nil
	}
	return -1, valueError(p.given[long], v, "must be one of "+strings.Join(names, ", "))
}

// socket reads --socket-path and --socket-mode. The mode is read only for a socket file; an
// abstract socket (path starting with '@') has mode 0 whatever --socket-mode says, as in Envoy.
func (p *parser) socket() error {
	if v, ok := p.raw["socket-path"]; ok {
		if v == "" {
			// Envoy reads the first byte of the path and crashes on an empty one.
			return valueError(p.given["socket-path"], v, "must not be empty")
		}
		p.o.SocketPath = v
	}
	if p.o.SocketPath[0] == '@' {
		p.o.SocketMode = 0
		return nil
	}
	mode, ok := p.raw["socket-mode"]
	if !ok {
		p.o.SocketMode = DefaultSocketMode
		return nil
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(mode, "+"), 8, 32)
	if err != nil {
		return valueError(p.given["socket-mode"], mode, "must be an octal number such as 644")
	}
	p.o.SocketMode = uint32(n)
	return nil
}

// parseStatsTags checks every --stats-tag: "name:value" split at the first ':', the name made
// of ASCII letters and digits, the value not empty and without '.'.
func (p *parser) parseStatsTags() error {
	for _, v := range p.statsTags {
		name, value, ok := strings.Cut(v, ":")
		if !ok {
			return valueError("--stats-tag", v, "must be name:value")
		}
		for _, c := range []byte(name) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				return valueError("--stats-tag", v, fmt.Sprintf("tag name %q must contain only ASCII letters and digits", name))
			}
		}
		if value == "" || strings.Contains(value, ".") {
			return valueError("--stats-tag", v, fmt.Sprintf("tag value %q must not be empty or contain '.'", value))
		}
		p.o.StatsTags = append(p.o.StatsTags, StatsTag{Name: name, Value: value})
	}
	return nil
}

// CheckComponents checks the component names of --component-log-level against the logger
// registry, as Envoy does while parsing; known reports whether a logger name exists. It
// returns an *Error naming the first unknown component, or nil.
func (o *Options) CheckComponents(known func(name string) bool) error {
	for _, c := range o.ComponentLogLevels {
		if !known(c.Name) {
			return valueError("--component-log-level", o.ComponentLogLevel,
				fmt.Sprintf("unknown component %q", c.Name))
		}
	}
	return nil
}
