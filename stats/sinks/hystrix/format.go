package hystrix

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// latencyQuantiles are the quantiles of upstream_rq_time a HystrixCommand
// carries, with the keys Envoy prints for them (quantile×100 through %g).
// P99.9 is one of Envoy's supported quantiles but not one of Hystrix's.
var (
	latencyQuantiles = [...]float64{0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 1}
	latencyKeys      = [...]string{"0", "25", "50", "75", "90", "95", "99", "99.5", "100"}
)

// object appends a hand-built JSON object the way Envoy's Hystrix sink
// writes it: `"key": value` pairs separated by ", ".
type object struct {
	b     []byte
	first bool
}

func openObject(b []byte, prefix string) object {
	b = append(b, prefix...)
	return object{b: append(b, '{'), first: true}
}

func (o *object) key(k string) {
	if !o.first {
		o.b = append(o.b, ", "...)
	}
	o.first = false
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, `": `...)
}

func (o *object) uint(k string, v uint64) {
	o.key(k)
	o.b = strconv.AppendUint(o.b, v, 10)
}

func (o *object) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *object) raw(k, v string) {
	o.key(k)
	o.b = append(o.b, v...)
}

func (o *object) str(k, v string) {
	o.key(k)
	o.b = appendQuoted(o.b, v)
}

// close ends the object and, with event set, the event-stream frame.
func (o *object) close(event bool) []byte {
	o.b = append(o.b, '}')
	if event {
		o.b = append(o.b, "\n\n"...)
	}
	return o.b
}

// appendQuoted writes s as a JSON string. Envoy writes names unescaped; for
// the names Envoy accepts in practice the bytes are the same, and a name
// holding a quote, a backslash or a control character still gives valid
// JSON here.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
			i++
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i++
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
	}
	return append(b, '"')
}

// appendFixed is C's %f (std::to_string of a double): six decimals.
func appendFixed(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'f', 6, 64)
}

// commandFields is what one HystrixCommand event shows.
type commandFields struct {
	name          string
	now           int64 // unix seconds
	roll          sample
	latency       []float64
	maxPending    uint64
	reportingHost uint64
	windowMs      int64
}

// appendCommand writes a HystrixCommand event with Envoy's keys, order and
// constants.
func appendCommand(b []byte, f commandFields) []byte {
	o := openObject(b, "data: ")
	o.str("type", "HystrixCommand")
	o.str("name", f.name)
	o.str("group", "NA")
	o.int("currentTime", f.now)
	o.raw("isCircuitBreakerOpen", "false")
	var pct uint64
	if f.roll.total != 0 {
		pct = 100 * (f.roll.errors + f.roll.timeouts + f.roll.rejected) / f.roll.total
	}
	o.uint("errorPercentage", pct)
	o.uint("errorCount", f.roll.errors)
	o.uint("requestCount", f.roll.total)
	o.uint("rollingCountCollapsedRequests", 0)
	o.uint("rollingCountExceptionsThrown", 0)
	o.uint("rollingCountFailure", f.roll.errors)
	o.uint("rollingCountFallbackFailure", 0)
	o.uint("rollingCountFallbackRejection", 0)
	o.uint("rollingCountFallbackSuccess", 0)
	o.uint("rollingCountResponsesFromCache", 0)
	// Pending-request overflow is the nearest thing Envoy has to Hystrix's
	// semaphore isolation rejecting a call.
	o.uint("rollingCountSemaphoreRejected", f.roll.rejected)
	// Envoy never short-circuits on error rate (outlier detection ejects
	// hosts instead), so this is always 0.
	o.uint("rollingCountShortCircuited", 0)
	o.uint("rollingCountSuccess", f.roll.success)
	o.uint("rollingCountThreadPoolRejected", 0)
	o.uint("rollingCountTimeout", f.roll.timeouts)
	o.uint("rollingCountBadRequests", 0)
	o.uint("currentConcurrentExecutionCount", 0)
	o.str("latencyExecute_mean", "null")
	o.key("latencyExecute")
	o.b = appendLatency(o.b, f.latency)
	o.uint("propertyValue_circuitBreakerRequestVolumeThreshold", 0)
	o.uint("propertyValue_circuitBreakerSleepWindowInMilliseconds", 0)
	o.uint("propertyValue_circuitBreakerErrorThresholdPercentage", 0)
	o.raw("propertyValue_circuitBreakerForceOpen", "false")
	o.raw("propertyValue_circuitBreakerForceClosed", "true")
	o.str("propertyValue_executionIsolationStrategy", "SEMAPHORE")
	o.uint("propertyValue_executionIsolationThreadTimeoutInMilliseconds", 0)
	o.raw("propertyValue_executionIsolationThreadInterruptOnTimeout", "false")
	o.uint("propertyValue_executionIsolationSemaphoreMaxConcurrentRequests", f.maxPending)
	o.uint("propertyValue_fallbackIsolationSemaphoreMaxConcurrentRequests", 0)
	o.raw("propertyValue_requestCacheEnabled", "false")
	o.raw("propertyValue_requestLogEnabled", "true")
	o.uint("reportingHosts", f.reportingHost)
	o.int("propertyValue_metricsRollingStatisticalWindowInMilliseconds", f.windowMs)
	return o.close(true)
}

// appendLatency writes the latencyExecute object: one entry per quantile
// with a value, ascending; an idle interval gives {}.
func appendLatency(b []byte, q []float64) []byte {
	o := openObject(b, "")
	for i, v := range q {
		if i >= len(latencyKeys) || math.IsNaN(v) {
			continue
		}
		o.key(latencyKeys[i])
		o.b = appendFixed(o.b, v)
	}
	return o.close(false)
}

// appendThreadPool writes a HystrixThreadPool event with Envoy's keys, order
// and constants.
func appendThreadPool(b []byte, name string, queueSize, reportingHosts uint64, windowMs int64) []byte {
	o := openObject(b, "data: ")
	o.uint("currentPoolSize", 0)
	o.uint("rollingMaxActiveThreads", 0)
	o.uint("currentActiveCount", 0)
	o.uint("currentCompletedTaskCount", 0)
	o.uint("propertyValue_queueSizeRejectionThreshold", queueSize)
	o.str("type", "HystrixThreadPool")
	o.uint("reportingHosts", reportingHosts)
	o.int("propertyValue_metricsRollingStatisticalWindowInMilliseconds", windowMs)
	o.str("name", name)
	o.uint("currentLargestPoolSize", 0)
	o.uint("currentCorePoolSize", 0)
	o.uint("currentQueueSize", 0)
	o.uint("currentTaskCount", 0)
	o.uint("rollingCountThreadsExecuted", 0)
	o.uint("currentMaximumPoolSize", 0)
	return o.close(true)
}
