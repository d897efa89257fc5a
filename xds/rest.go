package xds

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/xds/resource"
)

// restPaths are the REST endpoints of the v3 discovery services.
var restPaths = map[string]string{
	resource.ClusterType:  "/v3/discovery:clusters",
	resource.EndpointType: "/v3/discovery:endpoints",
	resource.ListenerType: "/v3/discovery:listeners",
	resource.RouteType:    "/v3/discovery:routes",
	resource.SecretType:   "/v3/discovery:secrets",
	resource.RuntimeType:  "/v3/discovery:runtime",
	// ECDS and SRDS; VHDS has no REST (nor state-of-the-world) form.
	resource.ExtensionConfigType: "/v3/discovery:extension_configs",
	resource.ScopedRouteType:     "/v3/discovery:scoped-routes",
}

// runREST polls the management server every refresh_delay, and at once when the subscribed
// names change: a JSON DiscoveryRequest is POSTed to the type's endpoint on a host of the
// source's cluster; 200 carries a DiscoveryResponse, 304 means nothing changed. A NACK travels
// in the next poll's error_detail, with the last accepted version.
func (m *mux) runREST(ctx context.Context) {
	cluster := m.api.Cluster
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return m.c.dial(ctx, cluster) },
		MaxIdleConnsPerHost: 1,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: m.api.RequestTimeout}
	m.mu.Lock()
	m.resetStreamLocked()
	m.mu.Unlock()
	for {
		m.mu.Lock()
		ws := m.orderedLocked()
		m.mu.Unlock()
		for _, w := range ws {
			if ctx.Err() != nil {
				return
			}
			m.restFetch(ctx, hc, w)
		}
		t := m.c.clock.AfterFunc(m.api.RefreshDelay, m.signal)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-m.wake:
			t.Stop()
		}
	}
}

// restFetch runs one poll for w's type.
func (m *mux) restFetch(ctx context.Context, hc *http.Client, w *watch) {
	m.mu.Lock()
	if !w.wildcard && len(w.names) == 0 {
		w.dirty = false
		m.mu.Unlock()
		return
	}
	// A poll that adds names goes without version_info. A REST server answers by version
	// (go-control-plane's gateway says 304 when the version is current), so the version held
	// for the old names would hide the new names' resources; Envoy does not meet this because
	// it polls each RDS name on a subscription, and version, of its own.
	version, added := w.version, w.added
	if added {
		version = ""
	}
	req := &discoveryv3.DiscoveryRequest{
		VersionInfo:   version,
		ResourceNames: sortedNames(w.names),
		TypeUrl:       w.typeURL,
		ResponseNonce: w.nonce,
		ErrorDetail:   errorDetail(w.nack),
		Node:          m.c.node,
	}
	w.dirty, w.added = false, false
	m.mu.Unlock()
	resp, err := m.restPost(ctx, hc, req)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return
		}
		if added {
			m.mu.Lock()
			w.added = true // the next poll still has names to fetch
			m.mu.Unlock()
		}
		m.c.log.Warnf("xds: %s: REST fetch of %s failed: %v", m.key, resource.ShortType(w.typeURL), err)
		w.h.failed(m)
		m.c.notify(w.typeURL, "", err)
	case resp != nil:
		if resp.GetTypeUrl() == "" {
			resp.TypeUrl = w.typeURL
		}
		if resp.GetTypeUrl() != w.typeURL {
			m.c.log.Warnf("xds: %s: REST response type %s; want %s", m.key, resp.GetTypeUrl(), w.typeURL)
			return
		}
		m.handleSotW(resp)
	}
}

// restPost sends req and returns the response, or nil for 304 Not Modified.
func (m *mux) restPost(ctx context.Context, hc *http.Client, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	body, err := protojson.Marshal(req)
	if err != nil {
		return nil, err
	}
	path, ok := restPaths[req.GetTypeUrl()]
	if !ok {
		return nil, fmt.Errorf("no REST endpoint for type %s", req.GetTypeUrl())
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.api.Cluster+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		return nil, nil
	default:
		return nil, fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(data))
	}
	out := &discoveryv3.DiscoveryResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("response is not a DiscoveryResponse: %v", err)
	}
	return out, nil
}
