// Package format renders a stats.Store the way Envoy's admin /stats and
// /stats/prometheus endpoints do: ParseQuery applies Envoy's parameter rules
// and error bodies, and WriteText, WriteJSON and WritePrometheus stream the
// byte-compatible text, compact JSON and Prometheus 0.0.4 layouts. WriteHTML
// renders format=html (the text lines inside a page with a query form) and
// format=active-html (a page whose script polls the JSON form and lists the
// stats that change most often); its scripts live in internal/web.
//
// Concurrency: the functions are safe to call concurrently with each other and
// with stat updates. They read stats through the store's iteration methods,
// which take the store lock only to snapshot the registration list, and write
// as they go through a buffered writer, so the body of a large store is never
// held in memory.
package format
