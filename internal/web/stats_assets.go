package web

import _ "embed"

// StatsCSS styles what the /stats HTML views add to AdminCSS: detailed
// histogram bars and the live view's table.
//
//go:embed stats.css
var StatsCSS string

// StatsJS is the script of /stats?format=html. It defines
// renderHistogram(parent, supportedPercentiles, detail), which draws one
// histogram of the histogram_buckets=detailed JSON layout (name, totals,
// intervals, percentiles) as a bar chart appended to parent.
//
//go:embed stats.js
var StatsJS string

// ActiveStatsJS is the script of /stats?format=active-html. It expects the
// inputs param-1-stats-filter, param-1-stats-type, active-max-display-count
// and active-update-interval and the elements active-status and
// active-content; it polls stats?format=json&usedonly and shows the stats
// whose values change most often.
//
//go:embed active_stats.js
var ActiveStatsJS string
