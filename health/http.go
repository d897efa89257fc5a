package health

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// Response headers the HTTP health checker reads.
const (
	headerDegraded              = "X-Envoy-Degraded"
	headerImmediateFail         = "X-Envoy-Immediate-Health-Check-Fail"
	headerHealthCheckedCluster  = "X-Envoy-Upstream-Healthchecked-Cluster"
	maxDiscardedBody            = 64 << 10
	maxUnboundedResponseCapture = 1 << 20
)

// httpProber implements http_health_check.
type httpProber struct {
	target
	hc *config.HTTPHealthCheck
}

func (p *httpProber) Session(h *host.Host) ProbeSession {
	tr, scheme := p.transport(h, p.hc.HTTP2)
	u := &url.URL{Scheme: scheme, Host: p.address(h)}
	if pu, err := url.ParseRequestURI(p.hc.Path); err == nil {
		u.Path, u.RawPath, u.RawQuery = pu.Path, pu.RawPath, pu.RawQuery
	} else {
		u.Opaque = p.hc.Path
	}
	return &httpSession{p: p, tr: tr, url: u.String()}
}

type httpSession struct {
	p   *httpProber
	tr  *http.Transport
	url string
}

func (s *httpSession) Check(ctx context.Context) Result {
	hc := s.p.hc
	var body io.Reader
	if hc.Send != nil {
		body = bytes.NewReader(hc.Send)
	}
	req, err := http.NewRequestWithContext(ctx, hc.Method, s.url, body)
	if err != nil {
		return failed(Network, err)
	}
	req.Host = s.p.authority(hc.Host)
	req.Header.Set("User-Agent", config.HealthCheckUserAgent)
	applyHeaders(req.Header, hc.RequestHeadersToAdd, hc.RequestHeadersToRemove)
	resp, err := s.tr.RoundTrip(req)
	if err != nil {
		return failed(Network, err)
	}
	defer resp.Body.Close()
	var got []byte
	if len(hc.Receive) > 0 {
		limit := int64(hc.ResponseBufferSize)
		if limit == 0 {
			limit = maxUnboundedResponseCapture
		}
		if got, err = io.ReadAll(io.LimitReader(resp.Body, limit)); err != nil {
			return failed(Network, err)
		}
	}
	// Drain a little so the connection can be reused; a body that does not end is cut off with
	// the connection.
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxDiscardedBody)); err != nil {
		return failed(Network, err)
	}
	res := s.verdict(resp, got)
	res.HTTPStatus = resp.StatusCode
	if !s.p.spec.ReuseConnection {
		s.tr.CloseIdleConnections()
	}
	return res
}

// verdict judges a complete response in Envoy's order: body payloads, status (expected, then
// retriable), then service_name_matcher; x-envoy-degraded marks a pass as degraded.
func (s *httpSession) verdict(resp *http.Response, body []byte) Result {
	hc := s.p.hc
	immediate := resp.Header.Get(headerImmediateFail) != ""
	if len(hc.Receive) > 0 && !matchPayloads(hc.Receive, body) {
		return Result{Outcome: Failed, Failure: Active, ImmediateFail: immediate,
			Err: fmt.Errorf("status %d: response body does not contain the receive payloads", resp.StatusCode)}
	}
	if !inRanges(hc.ExpectedStatuses, resp.StatusCode) {
		return Result{Outcome: Failed, Failure: Active, ImmediateFail: immediate,
			Retriable: inRanges(hc.RetriableStatuses, resp.StatusCode),
			Err:       fmt.Errorf("status %d is not an expected status", resp.StatusCode)}
	}
	out := Result{Outcome: Succeeded}
	if _, ok := resp.Header[headerDegraded]; ok {
		out.Outcome = SucceededDegraded
	}
	if hc.ServiceNameMatcher != nil && s.p.verifyCluster() {
		out.VerifiedCluster = true
		if got := resp.Header.Get(headerHealthCheckedCluster); !hc.ServiceNameMatcher.Match(got) {
			out.Outcome, out.Failure = Failed, Active
			out.Err = fmt.Errorf("x-envoy-upstream-healthchecked-cluster = %q does not match service_name_matcher", got)
		}
	}
	return out
}

func (s *httpSession) Close() { s.tr.CloseIdleConnections() }

func inRanges(ranges []config.StatusRange, code int) bool {
	for _, r := range ranges {
		if r.Contains(code) {
			return true
		}
	}
	return false
}
