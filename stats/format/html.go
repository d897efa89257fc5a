package format

import (
	"bufio"
	"io"
	"strconv"

	"github.com/legateproxy/legate/internal/web"
	"github.com/legateproxy/legate/stats"
)

// WriteHTML streams /stats?format=html, or /stats?format=active-html when
// q.Format is ActiveHTML; any other Format renders the html page. It returns
// the first write error. The caller sets Content-Type
// "text/html; charset=UTF-8".
//
// The html page (Envoy's StatsHtmlRender): the admin head, a form row for
// /stats whose widgets show the current query and submit on change, the
// histogram script, then the text-format lines in a <pre>. A phase with no
// stats prints "No <label> found", with Envoy's labels (and its quirk that
// with a type= filter the label is always "text readouts"). With
// histogram_buckets=detailed each histogram is a renderHistogram call.
//
// Unlike Envoy, stat names are HTML-escaped as well as text-readout values,
// so a cluster name cannot inject markup; names without &<>"' are
// unchanged. When no histogram_buckets was given the bucket select shows
// "summary", which is what the lines show, rather than Envoy's unselected
// first choice.
//
// The active-html page holds no stats: its script polls
// stats?format=json&usedonly with the filter and type chosen in the page and
// shows the stats that change most often (50 by default, every 5 s by
// default; both adjustable).
func WriteHTML(w io.Writer, s *stats.Store, q Query) error {
	bw := bufio.NewWriterSize(yieldWriter{w}, 64<<10)
	bw.WriteString("<!DOCTYPE html>\n<html lang='en'>\n<head>\n")
	bw.WriteString(web.HomeHead)
	bw.WriteString("<style>\n")
	bw.WriteString(web.AdminCSS)
	bw.WriteString(web.StatsCSS)
	bw.WriteString("</style>\n</head>\n<body>\n")
	if q.Format == ActiveHTML {
		writeActivePage(bw, q)
	} else {
		writeStatsPage(bw, s, q)
	}
	bw.WriteString("</body>\n</html>\n")
	return bw.Flush()
}

// The choices of the /stats enum parameters, in the home page's order.
var (
	formatChoices  = []string{"html", "active-html", "text", "json"}
	typeChoices    = []string{"All", "Counters", "Histograms", "Gauges", "TextReadouts"}
	bucketsChoices = []string{"cumulative", "disjoint", "detailed", "summary"}
)

// typeNames and bucketNames give the parameter value of a parsed Query.
var (
	typeNames   = []string{All: "All", Counters: "Counters", Gauges: "Gauges", Histograms: "Histograms", TextReadouts: "TextReadouts"}
	bucketNames = []string{BucketsUnset: "summary", BucketsSummary: "summary", BucketsCumulative: "cumulative", BucketsDisjoint: "disjoint", BucketsDetailed: "detailed"}
)

// nameOf returns names[i], or "" for a value no parameter produces.
func nameOf[T ~uint8](names []string, i T) string {
	if int(i) < len(names) {
		return names[i]
	}
	return ""
}

// widget is one input of the stats form. A nil choices with check false is a
// text input.
type widget struct {
	name, help string
	check      bool     // a checkbox, checked when value != ""
	choices    []string // a select, value the selected choice
	value      string
}

const (
	tableBegin = "\n  <table class='home-table'>\n    <thead>\n      <tr>\n        <th class='home-data'>Command</th>\n        <th class='home-data'>Description</th>\n      </tr>\n    </thead>\n    <tbody>\n"
	tableEnd   = "\n    </tbody>\n  </table>\n"
	// formRow is the (empty) form the widgets belong to through form='stats'.
	formRow = "\n<tr><td><form action='stats' method='get' id='stats' class='home-form'></form></td><td></td></tr>\n"
)

// writeWidgets writes one table row per widget, with the home page's ids
// (param-1-stats-<name>). submit adds onchange handlers that submit the form.
func writeWidgets(bw *bufio.Writer, widgets []widget, submit bool) {
	onChange := ""
	if submit {
		onChange = " onchange='this.form.submit()'"
	}
	for _, wd := range widgets {
		id := "param-1-stats-" + wd.name
		bw.WriteString("<tr class='gray'>\n  <td class='option'>")
		attrs := "name='" + wd.name + "' id='" + id + "' form='stats'" + onChange
		switch {
		case wd.check:
			checked := ""
			if wd.value != "" {
				checked = " checked"
			}
			bw.WriteString("<input type='checkbox' " + attrs + checked + ">")
		case wd.choices != nil:
			bw.WriteString("\n    <select " + attrs + ">\n")
			for _, c := range wd.choices {
				selected := ""
				if c == wd.value {
					selected = " selected"
				}
				bw.WriteString("      <option value='" + c + "'" + selected + ">" + c + "</option>\n")
			}
			bw.WriteString("    </select>\n  ")
		default:
			value := ""
			if wd.value != "" {
				value = " value='" + string(appendEscapedHTML(nil, wd.value)) + "'"
			}
			bw.WriteString("<input type='text' " + attrs + value + " />")
		}
		bw.WriteString("</td>\n  <td class='home-data'><label for='" + id + "'>" + wd.help + "</label></td>\n</tr>\n")
	}
}

// filterText is the filter parameter as given.
func filterText(q *Query) string {
	if q.Filter == nil {
		return ""
	}
	return q.Filter.String()
}

func writeStatsPage(bw *bufio.Writer, s *stats.Store, q Query) {
	used := ""
	if q.UsedOnly {
		used = "on"
	}
	bw.WriteString(tableBegin)
	bw.WriteString(formRow)
	writeWidgets(bw, []widget{
		{name: "usedonly", help: "Only include stats that have been written by system since restart", check: true, value: used},
		{name: "filter", help: "Regular expression (Google re2) for filtering stats", value: filterText(&q)},
		{name: "format", help: "Format to use", choices: formatChoices, value: "html"},
		{name: "type", help: "Stat types to include.", choices: typeChoices, value: nameOf(typeNames, q.Type)},
		{name: "histogram_buckets", help: "Histogram bucket display mode", choices: bucketsChoices, value: nameOf(bucketNames, q.Buckets)},
	}, true)
	bw.WriteString(tableEnd)
	bw.WriteString("<script>\n")
	bw.WriteString(web.StatsJS)
	bw.WriteString("</script>\n<pre>\n")
	writeStatLines(bw, s, q)
	bw.WriteString("</pre>\n")
}

// writeStatLines writes the text-format lines of the html page, phase by
// phase as WriteText does, with the "No … found" markers.
func writeStatLines(bw *bufio.Writer, s *stats.Store, q Query) {
	sel := selector{q: &q}
	var line []byte
	// Envoy names the empty phase by a label that starts as "text readouts"
	// and only advances when every type is shown.
	label := "text readouts"
	phase := func(kinds stats.Kinds, name string, fn func(st *stats.Stat)) {
		if q.Type == All {
			label = name
		}
		n := 0
		s.Each(kinds, func(st *stats.Stat) bool {
			if sel.keep(st) {
				n++
				line = appendEscapedHTML(line[:0], bytesString(sel.buf))
				fn(st)
			}
			return true
		})
		if n == 0 {
			bw.WriteString("</pre>\n<br/><i>No " + label + " found</i><br/>\n<pre>\n")
		}
	}
	textKinds, cgKinds, hist := q.phases()
	if textKinds != 0 {
		phase(textKinds, "text readouts", func(st *stats.Stat) {
			line = append(line, `: "`...)
			line = appendEscapedHTML(line, st.Text())
			line = append(line, "\"\n"...)
			bw.Write(line)
		})
	}
	if cgKinds != 0 {
		phase(cgKinds, "Counters and Gauges", func(st *stats.Stat) {
			line = append(line, ": "...)
			line = strconv.AppendUint(line, st.Value(), 10)
			line = append(line, '\n')
			bw.Write(line)
		})
	}
	if !hist {
		return
	}
	if q.Buckets != BucketsDetailed {
		phase(stats.KindSet(stats.KindHistogram), "Histograms", func(st *stats.Stat) {
			line = appendTextHistogram(append(line, ':'), st.Histogram(), q.Buckets)
			bw.Write(line)
		})
		return
	}
	drawn := 0
	phase(stats.KindSet(stats.KindHistogram), "Histograms", func(st *stats.Stat) {
		if drawn == 0 {
			bw.WriteString("</pre>\n<div id='histograms'></div>\n<script>\nconst histogramDiv = document.getElementById('histograms');\nconst supportedPercentiles = " + jsonQuantiles + ";\n</script>\n")
		}
		drawn++
		// line holds the escaped name; the JSON wants the raw one.
		line = appendJSONHistogram(line[:0], bytesString(sel.buf), st.Histogram(), BucketsDetailed)
		bw.WriteString("<script>renderHistogram(histogramDiv, supportedPercentiles, ")
		bw.Write(appendScriptSafe(nil, line))
		bw.WriteString(");</script>\n")
	})
	if drawn > 0 {
		bw.WriteString("<pre>\n")
	}
}

func writeActivePage(bw *bufio.Writer, q Query) {
	bw.WriteString(tableBegin)
	// Used-only is implied: the script always asks for usedonly, so the
	// checkbox is left out rather than shown without effect.
	writeWidgets(bw, []widget{
		{name: "filter", help: "Regular expression (Google re2) for filtering stats", value: filterText(&q)},
		{name: "type", help: "Stat types to include.", choices: typeChoices, value: nameOf(typeNames, q.Type)},
	}, false)
	bw.WriteString("<tr class='gray'>\n  <td class='option'><input type='number' min='1' step='1' name='max-display-count' id='active-max-display-count' value='50' /></td>\n  <td class='home-data'><label for='active-max-display-count'>Maximum number of stats to display</label></td>\n</tr>\n")
	bw.WriteString("<tr class='gray'>\n  <td class='option'><input type='number' min='0.1' step='any' name='update-interval' id='active-update-interval' value='5' /></td>\n  <td class='home-data'><label for='active-update-interval'>Number of seconds between each update</label></td>\n</tr>\n")
	bw.WriteString(tableEnd)
	bw.WriteString("<div id='active-status'>Loading…</div>\n<div id='active-content'></div>\n<script>\n")
	bw.WriteString(web.ActiveStatsJS)
	bw.WriteString("</script>\n")
}

// htmlEntities maps the bytes HTML escaping replaces to their entities.
var htmlEntities = [256]string{'&': "&amp;", '<': "&lt;", '>': "&gt;", '"': "&quot;", '\'': "&#39;"}

// appendEscapedHTML appends s with & < > " ' replaced by their entities, as
// Envoy's Html::Utility::sanitize does. Stat names rarely hold any, so the
// safe prefix is skipped eight bytes at a time and the rest is copied in runs.
func appendEscapedHTML(b []byte, s string) []byte {
	i := 0
	for i+8 <= len(s) && !hasHTMLSpecial(load64(s[i:])) {
		i += 8
	}
	start := 0
	for ; i < len(s); i++ {
		if e := htmlEntities[s[i]]; e != "" {
			b = append(append(b, s[start:i]...), e...)
			start = i + 1
		}
	}
	return append(b, s[start:]...)
}

// load64 reads the first eight bytes of s, little-endian.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// hasHTMLSpecial reports whether any byte of x is & ' " < or >. Setting bit 0
// folds & (0x26) into ' (0x27), and setting bit 1 folds < (0x3c) into >
// (0x3e); no other byte folds onto either.
func hasHTMLSpecial(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return zero((x|ones)^(ones*'\''))|zero(x^(ones*'"'))|zero((x|ones<<1)^(ones*'>')) != 0
}

// appendScriptSafe appends JSON text for use inside a <script> element:
// every '<' (which only occurs inside strings) becomes \u003c, so no
// "</script>" or "<!--" can end or confuse the element.
func appendScriptSafe(b, json []byte) []byte {
	for _, c := range json {
		if c == '<' {
			b = append(b, `\u003c`...)
		} else {
			b = append(b, c)
		}
	}
	return b
}
