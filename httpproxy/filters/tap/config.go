package tap

import (
	"fmt"
	"math/rand/v2"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/matcher/v3"
	tapconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/tap/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/fraction"
)

// Format is envoy.config.tap.v3.OutputSink.Format: how each TraceWrapper is written.
type Format = tapconfigv3.OutputSink_Format

// defaultMaxBuffered is Envoy's default for max_buffered_rx_bytes and max_buffered_tx_bytes.
const defaultMaxBuffered = 1024

// sinkKind is the output sink of a tap configuration.
type sinkKind uint8

const (
	sinkStreamingAdmin sinkKind = iota
	sinkFilePerTap
)

// Config is a compiled envoy.config.tap.v3.TapConfig: what to match and where and how to
// write the traces. Immutable; safe for concurrent use.
type Config struct {
	match      *Matcher
	maxRx      uint32 // output_config.max_buffered_rx_bytes
	maxTx      uint32 // output_config.max_buffered_tx_bytes
	streaming  bool   // output_config.streaming
	sink       sinkKind
	format     Format
	pathPrefix string // file_per_tap.path_prefix

	sampled    bool                      // tap_enabled is set
	sampleRate *typev3.FractionalPercent // tap_enabled.default_value
}

// Compile checks and compiles a TapConfig; path names it in errors (for example
// "common_config.static_config" or "tap_config").
func Compile(pb *tapconfigv3.TapConfig, path string) (*Config, error) {
	if pb == nil {
		return nil, fmt.Errorf("%s: unset; a tap configuration is required", path)
	}
	c := &Config{maxRx: defaultMaxBuffered, maxTx: defaultMaxBuffered}
	var err error
	switch {
	case pb.GetMatch() != nil:
		c.match, err = compileMatcher(pb.GetMatch(), path+".match")
	case pb.GetMatchConfig() != nil:
		// The deprecated tap MatchPredicate has the same wire form as the common one, so it is
		// read through it, as Envoy does.
		var up matcherv3.MatchPredicate
		if b, merr := proto.Marshal(pb.GetMatchConfig()); merr != nil {
			err = fmt.Errorf("%s.match_config: %w", path, merr)
		} else if uerr := proto.Unmarshal(b, &up); uerr != nil {
			err = fmt.Errorf("%s.match_config: %w", path, uerr)
		} else {
			c.match, err = compileMatcher(&up, path+".match_config")
		}
	default:
		err = fmt.Errorf("%s: neither match nor match_config is set; one is required", path)
	}
	if err != nil {
		return nil, err
	}
	out := pb.GetOutputConfig()
	if out == nil {
		return nil, fmt.Errorf("%s.output_config: unset; it is required", path)
	}
	if v := out.GetMaxBufferedRxBytes(); v != nil {
		c.maxRx = v.GetValue()
	}
	if v := out.GetMaxBufferedTxBytes(); v != nil {
		c.maxTx = v.GetValue()
	}
	c.streaming = out.GetStreaming()
	if out.GetMinStreamedSentBytes() != nil {
		return nil, fmt.Errorf("%s.output_config.min_streamed_sent_bytes: not implemented by Legate", path)
	}
	if n := len(out.GetSinks()); n != 1 {
		return nil, fmt.Errorf("%s.output_config.sinks: %d sinks; exactly one is supported", path, n)
	}
	sink := out.GetSinks()[0]
	spath := path + ".output_config.sinks[0]"
	c.format = sink.GetFormat()
	if _, ok := tapconfigv3.OutputSink_Format_name[int32(c.format)]; !ok {
		return nil, fmt.Errorf("%s.format = %d; not a known format", spath, c.format)
	}
	switch s := sink.GetOutputSinkType().(type) {
	case *tapconfigv3.OutputSink_StreamingAdmin:
		c.sink = sinkStreamingAdmin
	case *tapconfigv3.OutputSink_FilePerTap:
		c.sink, c.pathPrefix = sinkFilePerTap, s.FilePerTap.GetPathPrefix()
		if c.pathPrefix == "" {
			return nil, fmt.Errorf("%s.file_per_tap.path_prefix = \"\"; must not be empty", spath)
		}
	case *tapconfigv3.OutputSink_StreamingGrpc:
		return nil, fmt.Errorf("%s.streaming_grpc: not implemented by Legate (streaming_admin and file_per_tap are)", spath)
	case *tapconfigv3.OutputSink_BufferedAdmin:
		return nil, fmt.Errorf("%s.buffered_admin: not implemented by Legate (streaming_admin and file_per_tap are)", spath)
	case *tapconfigv3.OutputSink_CustomSink:
		return nil, fmt.Errorf("%s.custom_sink: not implemented by Legate (streaming_admin and file_per_tap are)", spath)
	default:
		return nil, fmt.Errorf("%s: no output sink type; streaming_admin or file_per_tap is required", spath)
	}
	if te := pb.GetTapEnabled(); te != nil {
		if te.GetRuntimeKey() != "" {
			return nil, fmt.Errorf("%s.tap_enabled.runtime_key = %q: runtime overrides of tap sampling are not implemented by Legate", path, te.GetRuntimeKey())
		}
		c.sampled, c.sampleRate = true, te.GetDefaultValue()
	}
	return c, nil
}

// checkAdminFormat reports whether the admin stream can carry format: the JSON formats and
// the length-delimited binary form Envoy streams, and (beyond Envoy, which aborts) proto
// text. Plain binary is not self-delimiting and is refused.
func checkAdminFormat(f Format, path string) error {
	switch f {
	case tapconfigv3.OutputSink_JSON_BODY_AS_BYTES, tapconfigv3.OutputSink_JSON_BODY_AS_STRING,
		tapconfigv3.OutputSink_PROTO_BINARY_LENGTH_DELIMITED, tapconfigv3.OutputSink_PROTO_TEXT:
		return nil
	}
	return fmt.Errorf("%s.format = %s; the streaming_admin sink cannot delimit it (use JSON_BODY_AS_BYTES, JSON_BODY_AS_STRING, PROTO_BINARY_LENGTH_DELIMITED or PROTO_TEXT)", path, f)
}

// admit applies tap_enabled: without it every stream is matched; with it, the fraction
// default_value of streams.
func (c *Config) admit() bool {
	if !c.sampled {
		return true
	}
	den, ok := fraction.Denominator(c.sampleRate.GetDenominator())
	if !ok {
		den = 1_000_000
	}
	return rand.Uint64N(den) < uint64(c.sampleRate.GetNumerator())
}

// sampleRateProto is the configured_sample_rate of a trace's first message (nil without
// tap_enabled).
func (c *Config) sampleRateProto() *typev3.FractionalPercent {
	if !c.sampled {
		return nil
	}
	if c.sampleRate == nil {
		return &typev3.FractionalPercent{}
	}
	return proto.Clone(c.sampleRate).(*typev3.FractionalPercent)
}
