package format

import (
	"regexp"
)

// Type is the /stats type= parameter.
type Type uint8

// The stat types /stats?type= accepts.
const (
	All Type = iota
	Counters
	Gauges
	Histograms
	TextReadouts
)

// HiddenMode is the /stats hidden= parameter.
type HiddenMode uint8

// Hidden modes; the zero value, Exclude, is Envoy's default.
const (
	HiddenExclude HiddenMode = iota
	HiddenInclude
	HiddenOnly
)

// Format is the /stats format= parameter.
type Format uint8

// Output formats. HTML and ActiveHTML are accepted here and rendered by the
// admin package.
const (
	Text Format = iota
	JSON
	Prometheus
	HTML
	ActiveHTML
)

// BucketMode is the histogram_buckets= parameter.
type BucketMode uint8

// Bucket modes. BucketsUnset renders quantiles (text, JSON) or a Prometheus
// histogram; Summary is the explicit summary/none choice.
const (
	BucketsUnset BucketMode = iota
	BucketsSummary
	BucketsCumulative
	BucketsDisjoint
	BucketsDetailed
)

// Query is a parsed /stats (or /stats/prometheus) request.
type Query struct {
	UsedOnly     bool
	Filter       *regexp.Regexp // partial match against the full stat name; nil means all
	Type         Type
	Hidden       HiddenMode
	Format       Format
	Buckets      BucketMode
	TextReadouts bool // Prometheus only: emit text readouts as gauges
}

// Error is a bad parameter. Body is exactly Envoy's 400 response body.
type Error struct{ Body string }

func (e *Error) Error() string { return e.Body }

// The 400 bodies Envoy sends for bad /stats parameters.
const (
	errFilter     = "Invalid re2 regex"
	errBuckets    = "usage: /stats?histogram_buckets=(cumulative|disjoint|detailed|summary)\n"
	errType       = "invalid &type= param"
	errHidden     = "usage: /stats?hidden=(include|only|exclude)\n\n"
	errFormat     = "usage: /stats?format=(html|active-html|json|prometheus|text)\n\n"
	errPromBucket = "unsupported prometheus histogram bucket mode"
)

// first returns the first value of a parameter; an empty value counts as
// absent, as in Envoy since its multi-value query rework.
func first(q map[string][]string, key string) string {
	if v := q[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ParseQuery applies Envoy's /stats parameter rules (validation order:
// filter, histogram_buckets, type, hidden, format; the first error wins).
// prometheus is true for /stats/prometheus; format=prometheus has the same
// effect. A returned error is an *Error whose Body is Envoy's 400 body.
func ParseQuery(q map[string][]string, prometheus bool) (Query, error) {
	var out Query
	_, out.UsedOnly = q["usedonly"]
	_, out.TextReadouts = q["text_readouts"]
	if f := first(q, "filter"); f != "" {
		re, err := regexp.Compile(f)
		if err != nil {
			return out, &Error{errFilter}
		}
		out.Filter = re
	}
	switch first(q, "histogram_buckets") {
	case "":
	case "cumulative":
		out.Buckets = BucketsCumulative
	case "disjoint":
		out.Buckets = BucketsDisjoint
	case "detailed":
		out.Buckets = BucketsDetailed
	case "summary", "none":
		out.Buckets = BucketsSummary
	default:
		return out, &Error{errBuckets}
	}
	switch first(q, "type") {
	case "", "All":
	case "Counters":
		out.Type = Counters
	case "Gauges":
		out.Type = Gauges
	case "Histograms":
		out.Type = Histograms
	case "TextReadouts":
		out.Type = TextReadouts
	default:
		return out, &Error{errType}
	}
	switch first(q, "hidden") {
	case "", "exclude":
	case "include":
		out.Hidden = HiddenInclude
	case "only":
		out.Hidden = HiddenOnly
	default:
		return out, &Error{errHidden}
	}
	switch first(q, "format") {
	case "", "text":
	case "json":
		out.Format = JSON
	case "prometheus":
		out.Format = Prometheus
	case "html":
		out.Format = HTML
	case "active-html":
		out.Format = ActiveHTML
	default:
		return out, &Error{errFormat}
	}
	if prometheus {
		out.Format = Prometheus
	}
	if out.Format == Prometheus && (out.Buckets == BucketsDisjoint || out.Buckets == BucketsDetailed) {
		return out, &Error{errPromBucket}
	}
	return out, nil
}
