// Package httpservice posts to an Envoy HttpService (envoy.config.core.v3.HttpService): an
// http_uri naming a cluster, the request's URI and timeout, and headers to add. It is how the
// OpenTelemetry tracer, stats sink and access logger speak OTLP over HTTP, and Zipkin's
// collector_service, each through the cluster's dialer (and its TLS, if the cluster has one).
package httpservice

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/internal/grpcclient"
)

// Client sends requests to one HttpService. It is safe for concurrent use.
type Client struct {
	// Cluster is http_uri.cluster.
	Cluster string
	url     string
	host    string
	headers [][2]string // request_headers_to_add, in order
	timeout time.Duration
	http    *http.Client
}

// New checks hs (path names it in errors) and returns its client. exists (nil accepts any)
// says whether a cluster may be named; dial connects to a host of it. Fields Legate does not
// implement are refused.
func New(path string, hs *corev3.HttpService, exists func(string) bool, dial grpcclient.Dial) (*Client, error) {
	u := hs.GetHttpUri()
	switch {
	case u == nil:
		return nil, fmt.Errorf("%s.http_uri: required", path)
	case len(hs.GetFormatters()) > 0:
		return nil, fmt.Errorf("%s.formatters: not implemented by Legate", path)
	case u.GetCluster() == "":
		return nil, fmt.Errorf("%s.http_uri.cluster: required", path)
	case exists != nil && !exists(u.GetCluster()):
		return nil, fmt.Errorf("%s.http_uri.cluster = %q: unknown cluster", path, u.GetCluster())
	}
	parsed, err := url.Parse(u.GetUri())
	if err != nil || parsed.Host == "" || (parsed.Scheme != "http" && parsed.Scheme != "https") {
		return nil, fmt.Errorf("%s.http_uri.uri = %q: must be an absolute http or https URI", path, u.GetUri())
	}
	c := &Client{Cluster: u.GetCluster(), host: parsed.Host, timeout: 5 * time.Second}
	if t := u.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() <= 0 {
			return nil, fmt.Errorf("%s.http_uri.timeout: must be a positive duration", path)
		}
		c.timeout = t.AsDuration()
	}
	// The scheme is the cluster's business (its transport socket), as in Envoy: the request
	// goes in plain HTTP over whatever the dialer returns.
	target := *parsed
	target.Scheme, target.Host = "http", c.Cluster
	c.url = target.String()
	for i, h := range hs.GetRequestHeadersToAdd() {
		k := h.GetHeader().GetKey()
		if k == "" || strings.HasPrefix(k, ":") {
			return nil, fmt.Errorf("%s.request_headers_to_add[%d].header.key = %q: must be a header name", path, i, k)
		}
		c.headers = append(c.headers, [2]string{k, h.GetHeader().GetValue()})
	}
	cluster := c.Cluster
	c.http = &http.Client{Timeout: c.timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if dial == nil {
				return nil, fmt.Errorf("cluster %q: no dialer", cluster)
			}
			return dial(ctx, cluster)
		},
	}}
	return c, nil
}

// Post sends body with contentType and returns the response's status; the response body is
// read and dropped.
func (c *Client) Post(ctx context.Context, contentType string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Host = c.host
	req.Header.Set("Content-Type", contentType)
	for _, h := range c.headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }
