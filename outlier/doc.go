// Package outlier is Envoy's passive outlier detection for one cluster: it watches the results of
// real requests (HTTP status codes, gateway errors, local-origin connect failures and timeouts),
// ejects hosts that look like outliers by setting host.FailedOutlierCheck, and returns them to
// service after base_ejection_time × n (capped by max_ejection_time, plus jitter).
//
// Detection rules: consecutive 5xx, consecutive gateway failures, consecutive local-origin
// failures (with split_external_local_origin_errors), success rate (mean − stdev × factor) and
// failure percentage, each gated by its enforcing_* percentage and by max_ejection_percent, every
// value overridable at run time through the outlier_detection.* runtime keys.
//
// Concurrency: Detector.Report is the request path. It takes no lock and allocates nothing: it
// finds the host's monitor in an immutable index published through an atomic.Pointer and updates
// the current success-rate bucket, kept on a line per P (one atomic add of a packed
// request/success pair to the calling P's line), and the consecutive-failure counters, which a
// success writes only when they are not already zero, so a successful request writes no line
// another core writes. When a consecutive-failure counter reaches
// its threshold, Report marks the monitor and hands it to the control side through a buffered
// channel (never blocking; a full channel falls back to a rescan). Everything else — ejection,
// unejection, the interval sweep, host set changes, active health-check unejection — is the
// control path: it runs under Detector.mu, mostly on the goroutine of Detector.Run, which owns
// the interval timer. Getters used by /clusters read atomics.
package outlier
