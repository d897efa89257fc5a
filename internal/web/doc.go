// Package web holds the static parts of the admin pages (CSS, head snippet,
// and the scripts of the stats views), embedded in the binary so the admin
// interface needs no files on disk. It has no state.
package web
