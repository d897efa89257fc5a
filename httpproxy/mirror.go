package httpproxy

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
)

// startMirrors sends a copy of the upstream request (s.up, built for the route's cluster) to
// each of the route's mirror clusters whose runtime_fraction samples it, as Envoy's shadow
// policies do: fire and forget, the response read and discarded, the copy's authority given
// the "-shadow" suffix. A request body is copied from the stream's buffer; one too large to
// buffer (over the buffer limit) is not mirrored. Copies outlive the stream, so each owns its
// strings and body; the handler's Close cancels those still running.
func (s *stream) startMirrors(r *route.Route, timeout time.Duration) {
	if s.body != nil && !s.bodyBuffered && !s.bufferBody() {
		return
	}
	for i := range r.Mirrors {
		m := &r.Mirrors[i]
		if !m.Sampled(rand.Uint64()) {
			continue
		}
		name := m.ClusterFor(&s.req)
		mgr := s.h.sh.deps.Pools.Get(name)
		if mgr == nil {
			continue // Envoy skips a shadow cluster it does not know
		}
		req := &pool.Request{
			Method:        strings.Clone(s.up.Method),
			Path:          strings.Clone(s.up.Path),
			Host:          strings.Clone(m.Authority(s.up.Host)),
			Header:        make([]pool.Field, len(s.up.Header)),
			ContentLength: -1,
			Priority:      s.up.Priority,
			HTTP2:         s.up.HTTP2,
		}
		for j, f := range s.up.Header {
			req.Header[j] = pool.Field{Name: strings.Clone(f.Name), Value: strings.Clone(f.Value)}
		}
		if s.body != nil {
			body := append([]byte(nil), s.bodyBuf...)
			req.Body, req.ContentLength = bytesReader(body), int64(len(body))
		}
		s.h.wg.Add(1) // the stream's connection holds the group open, so Add is safe here
		go s.h.mirror(mgr, req, timeout)
	}
}

func bytesReader(b []byte) io.Reader { return &mirrorBody{b: b} }

// mirrorBody is a request body the mirror owns.
type mirrorBody struct{ b []byte }

func (r *mirrorBody) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// mirror runs one mirrored request to the cluster of mgr within the route's timeout (none
// when 0, as Envoy's shadow requests take the route's), counting its response code on the
// cluster as the router counts its own requests. The counters are found by the cluster's own
// name: a cluster_header mirror's name views the stream's arena, which the connection's next
// request overwrites while the mirror still runs.
func (h *Handler) mirror(mgr *pool.Manager, req *pool.Request, timeout time.Duration) {
	defer h.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), timeout)
	}
	defer cancel()
	go func() { // the handler's Close ends mirrors still running
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := mgr.Cluster()
	name := c.Name()
	snap := c.Snapshot()
	hst, err := c.Pick(&lb.Context{})
	if err != nil {
		snap.Stats.UpstreamCxNoneHealthy.Inc()
		return
	}
	var resp pool.Response
	defer resp.Close()
	if err := mgr.RoundTrip(ctx, hst, req, &resp); err != nil {
		if classify(err, ctx) == failTimeout {
			h.sh.stats.upstream(name).charge(http.StatusGatewayTimeout, snap.Stats, stats.ThisLine())
		}
		return
	}
	h.sh.stats.upstream(name).charge(resp.StatusCode, snap.Stats, stats.ThisLine())
	if resp.Body != nil {
		io.Copy(io.Discard, resp.Body)
	}
}
