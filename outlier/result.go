package outlier

import "strconv"

// Result is one outcome the data plane reports for a host: an HTTP status from the upstream, or a
// local-origin event (Envoy's Outlier::Result and putHttpResponseCode). It is a small value:
// building and passing one never allocates.
type Result uint32

// resultKind is the upper half of a Result; the lower 16 bits hold an HTTP status (0: none).
type resultKind uint32

const (
	kindHTTP resultKind = iota
	kindConnectFailed
	kindTimeout
	kindConnectSuccess
	kindConnectSuccessFinal
	kindRequestFailed
	kindRequestSuccess
)

const (
	kindShift  = 16
	statusMask = 1<<kindShift - 1
)

// Local-origin and transaction events (Envoy's Outlier::Result values).
const (
	// ConnectFailed: the connection to the host could not be established or was reset
	// (LOCAL_ORIGIN_CONNECT_FAILED). Counted as a 503 when errors are not split.
	ConnectFailed = Result(kindConnectFailed << kindShift)
	// Timeout: the host did not answer in time (LOCAL_ORIGIN_TIMEOUT). Counted as a 504 when errors
	// are not split.
	Timeout = Result(kindTimeout << kindShift)
	// ConnectSuccess: the connection was established; the protocol's own result follows
	// (LOCAL_ORIGIN_CONNECT_SUCCESS). Ignored when errors are not split.
	ConnectSuccess = Result(kindConnectSuccess << kindShift)
	// ConnectSuccessFinal: the connection was established and that is the whole transaction, as
	// for the TCP proxy (LOCAL_ORIGIN_CONNECT_SUCCESS_FINAL). Counted as a 200 when errors are not
	// split.
	ConnectSuccessFinal = Result(kindConnectSuccessFinal << kindShift)
	// RequestFailed: a non-HTTP transaction failed at the server (EXT_ORIGIN_REQUEST_FAILED);
	// counted as a 500 (503 when errors are split).
	RequestFailed = Result(kindRequestFailed << kindShift)
	// RequestSuccess: a non-HTTP transaction succeeded (EXT_ORIGIN_REQUEST_SUCCESS); counted as a
	// 200.
	RequestSuccess = Result(kindRequestSuccess << kindShift)
)

// HTTPStatus is an HTTP response status from the upstream (Envoy's putHttpResponseCode). Codes
// outside 0..65535 are clamped to 0, which counts as a success, like any code that is not 5xx.
func HTTPStatus(code int) Result {
	if code < 0 || code > statusMask {
		code = 0
	}
	return Result(code)
}

// WithStatus attaches the HTTP status the router answers with for a local-origin event (for
// example 504 for Timeout). When external and local-origin errors are not split, that status is
// what counts, as in Envoy's putResult(result, code). A status outside 1..65535 leaves r as is.
func (r Result) WithStatus(code int) Result {
	if code <= 0 || code > statusMask {
		return r
	}
	return r&^statusMask | Result(code)
}

func (r Result) kind() resultKind { return resultKind(r >> kindShift) }

func (r Result) status() uint32 { return uint32(r) & statusMask }

// String names the result, for logs and test failures.
func (r Result) String() string {
	names := [...]string{"http", "connect_failed", "timeout", "connect_success", "connect_success_final", "request_failed", "request_success"}
	k := r.kind()
	name := "unknown"
	if int(k) < len(names) {
		name = names[k]
	}
	if s := r.status(); s != 0 {
		return name + "(" + strconv.FormatUint(uint64(s), 10) + ")"
	}
	return name
}

func is5xx(code uint32) bool { return code >= 500 && code < 600 }

// isGatewayError reports 502, 503 and 504, the statuses consecutive_gateway_failure counts.
func isGatewayError(code uint32) bool { return code >= 502 && code <= 504 }
