package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// admittedLoad sends GETs from keep-alive and new-connection clients until stopped, and tells
// apart requests Legate admitted and failed (a reset, an EOF, a wrong answer) from connections
// it refused once its listeners had stopped, which are not failures of an admitted request.
type admittedLoad struct {
	ok, refused, reset, failed atomic.Int64
	mu                         sync.Mutex
	errs                       []string
	stop                       chan struct{}
	wg                         sync.WaitGroup
}

func startAdmittedLoad(addr string) *admittedLoad {
	l := &admittedLoad{stop: make(chan struct{})}
	keepAlive := &http.Transport{MaxIdleConnsPerHost: 4}
	fresh := &http.Transport{DisableKeepAlives: true}
	for i, tr := range []*http.Transport{keepAlive, keepAlive, fresh, fresh, fresh} {
		c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		url := fmt.Sprintf("http://%s/w%d", addr, i)
		l.wg.Go(func() {
			deadline := time.After(time.Minute) // bounded even if the test forgets to stop
			for {
				select {
				case <-l.stop:
					return
				case <-deadline:
					return
				default:
				}
				l.one(c, url)
			}
		})
	}
	return l
}

func (l *admittedLoad) one(c *http.Client, url string) {
	resp, err := c.Get(url)
	if err == nil {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil && resp.StatusCode == http.StatusOK && string(body) == "upstream ok" {
			l.ok.Add(1)
			return
		}
		err = fmt.Errorf("status %d, body %q, read error %v", resp.StatusCode, body, rerr)
	} else if errors.Is(err, syscall.ECONNREFUSED) {
		l.refused.Add(1)
		time.Sleep(time.Millisecond) // nothing listens: do not spin
		return
	} else if errors.Is(err, syscall.ECONNRESET) {
		// A connection the kernel queued on the listening socket after the last accept is
		// reset by the socket's close: the request never reached Legate.
		l.reset.Add(1)
		return
	}
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.errs) < 10 {
		l.errs = append(l.errs, err.Error())
	}
	l.mu.Unlock()
}

func (l *admittedLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// TestDrainUnderLoadLosesNothing: a drain's end (SIGTERM, or POST /drain_listeners?graceful)
// stops new connections, lets what was admitted finish, and exits; every request Legate
// accepted is answered. Before, the exit came as the listeners stopped, and cut the requests
// admitted in the drain's last moments (EOF). A connection the kernel queued in the instant
// between the last accept and the socket's close is reset by the close and never reaches
// Legate; those are counted apart.
func TestDrainUnderLoadLosesNothing(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream ok")
	}))
	defer upstream.Close()
	cfg := writeConfig(t, proxyConfig(upstream.Listener.Addr().String()))
	for _, how := range []string{"SIGTERM", "drain_listeners"} {
		t.Run(how, func(t *testing.T) {
			p := start(t, "-c", cfg, "--drain-time-s", "2", "--use-dynamic-base-id")
			l := startAdmittedLoad(p.ingressAddr())
			p.waitStatAtLeast("http.ingress_http.downstream_rq_2xx", 200)
			if how == "SIGTERM" {
				p.signal(syscall.SIGTERM)
			} else if code, _, body := p.post("/drain_listeners?graceful"); code != http.StatusOK {
				t.Fatalf("drain_listeners?graceful = %d %q", code, body)
			}
			code := p.wait(20 * time.Second)
			l.finish()
			if code != 0 {
				t.Errorf("exit code %d; want 0", code)
			}
			t.Logf("%s: %d answered, %d refused after the listeners stopped, %d reset as the listening socket closed, %d failed",
				how, l.ok.Load(), l.refused.Load(), l.reset.Load(), l.failed.Load())
			if n := l.failed.Load(); n > 0 {
				t.Errorf("%d admitted requests failed during the drain; first errors: %v", n, l.errs)
			}
		})
	}
}
