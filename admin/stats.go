package admin

import (
	"fmt"
	"io"
	"net/http"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/format"
)

// StatsEndpoints returns /stats, /stats/prometheus, /reset_counters and the
// recent-lookups endpoints over store.
func StatsEndpoints(store *stats.Store) []Endpoint {
	usedOnly := Param{Name: "usedonly", Kind: ParamBool, Help: "Only include stats that have been written by system since restart"}
	filter := Param{Name: "filter", Kind: ParamString, Help: "Regular expression (Google re2) for filtering stats"}
	ok := func(w http.ResponseWriter) { io.WriteString(w, "OK\n") }
	return []Endpoint{
		{
			Path:      "/stats",
			Help:      "print server stats",
			QueryOnly: true,
			Params: []Param{
				usedOnly, filter,
				{Name: "format", Kind: ParamEnum, Help: "Format to use", Choices: []string{"html", "active-html", "text", "json"}},
				{Name: "type", Kind: ParamEnum, Help: "Stat types to include.", Choices: []string{"All", "Counters", "Histograms", "Gauges", "TextReadouts"}},
				{Name: "histogram_buckets", Kind: ParamEnum, Help: "Histogram bucket display mode", Choices: []string{"cumulative", "disjoint", "detailed", "summary"}},
			},
			Handle: func(w http.ResponseWriter, r *http.Request, q Query) {
				serveStats(w, r, store, q, false)
			},
		},
		{
			Path:      "/stats/prometheus",
			Help:      "print server stats in prometheus format",
			QueryOnly: true,
			Params: []Param{
				usedOnly,
				{Name: "text_readouts", Kind: ParamBool, Help: "Render text_readouts as new gaugues with value 0 (increases Prometheus data size)"},
				filter,
				{Name: "histogram_buckets", Kind: ParamEnum, Help: "Histogram bucket display mode", Choices: []string{"cumulative", "summary"}},
			},
			Handle: func(w http.ResponseWriter, r *http.Request, q Query) {
				serveStats(w, r, store, q, true)
			},
		},
		{
			Path:    "/reset_counters",
			Help:    "reset all counters to zero",
			Mutates: true,
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				store.ResetCounters()
				ok(w)
			},
		},
		{
			Path: "/stats/recentlookups",
			Help: "Show recent stat-name lookups",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				writeRecentLookups(w, store)
			},
		},
		{
			Path:    "/stats/recentlookups/clear",
			Help:    "clear list of stat-name lookups and counter",
			Mutates: true,
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				store.ClearRecentLookups()
				ok(w)
			},
		},
		{
			Path:    "/stats/recentlookups/disable",
			Help:    "disable recording of reset stat-name lookup names",
			Mutates: true,
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				store.DisableRecentLookups()
				ok(w)
			},
		},
		{
			Path:    "/stats/recentlookups/enable",
			Help:    "enable recording of reset stat-name lookup names",
			Mutates: true,
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				if err := store.EnableRecentLookups(); err != nil {
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, err.Error()+"\n")
					return
				}
				ok(w)
			},
		},
	}
}

func serveStats(w http.ResponseWriter, r *http.Request, store *stats.Store, q Query, prometheus bool) {
	fq, err := format.ParseQuery(q, prometheus)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, err.Error())
		return
	}
	store.FlushForAdmin()
	switch fq.Format {
	case format.JSON:
		w.Header().Set("Content-Type", "application/json")
		err = format.WriteJSON(w, store, fq)
	case format.Prometheus:
		err = format.WritePrometheus(w, store, fq)
	case format.HTML, format.ActiveHTML:
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		err = format.WriteHTML(w, store, fq)
	default:
		err = format.WriteText(w, store, fq)
	}
	if err != nil && r.Context().Err() == nil {
		// Headers are gone by now; the truncated body is all a client sees.
		fmt.Fprintf(w, "\nerror rendering stats: %v\n", err)
	}
}

// writeRecentLookups renders /stats/recentlookups as Envoy does.
func writeRecentLookups(w io.Writer, store *stats.Store) {
	enabled, list := store.RecentLookups()
	if !enabled && len(list) == 0 {
		io.WriteString(w, "Lookup tracking is not enabled. Use /stats/recentlookups/enable to enable.\n")
	} else {
		io.WriteString(w, "   Count Lookup\n")
		for _, l := range list {
			fmt.Fprintf(w, "%8d %s\n", l.Count, l.Name)
		}
	}
	fmt.Fprintf(w, "\ntotal: %d\n", store.RecentLookupsTotal())
}
