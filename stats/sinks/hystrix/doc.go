// Package hystrix is the stats sink envoy.stat_sinks.hystrix
// (envoy.config.metrics.v3.HystrixSink): at every stats flush it turns each
// cluster's cluster.<name>.* stats into the Hystrix dashboard's
// HystrixCommand and HystrixThreadPool events and broadcasts them, as
// text/event-stream frames, to every connected dashboard client. The admin
// endpoints /hystrix_event_stream and /dashboard_event_stream (package admin)
// are its only readers.
//
// Concurrency: Flush runs on the stats flusher's goroutine, one call at a
// time. Stream runs on each client's own request goroutine. One mutex guards
// the client set and the rolling windows; Flush holds it while it builds one
// immutable frame block and offers it to each client's bounded channel
// without blocking, so a slow client loses frames instead of delaying the
// flush. A client is removed the moment its Stream returns; no goroutine is
// started per client.
package hystrix
