package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// Config is what the bootstrap's admin block and the command line give the
// admin server.
type Config struct {
	// Address is "host:port"; port 0 picks a free port (see Server.Addr).
	Address string
	// AccessLog receives one line per request in Envoy's default access-log
	// format; nil logs nothing.
	AccessLog io.Writer
	// Warnf reports operator-facing warnings (a non-loopback bind, a GET on a
	// mutation); nil drops them.
	Warnf func(format string, args ...any)
	// Now is the clock for access-log timestamps; nil means the system clock.
	Now func() time.Time
	// OnCrossOrigin is called for each request refused because a browser
	// sent it from another origin (see RefuseCrossOrigin); nil ignores them.
	OnCrossOrigin func(r *http.Request)
	// AllowedHosts are Host names the admin answers besides its own
	// addresses, loopback names and the machine's hostname ("*": any); see
	// AllowedHostsEnv.
	AllowedHosts []string
	// OnForeignHost is called for each request refused because its Host
	// names something else (a DNS-rebound page); nil ignores them.
	OnForeignHost func(r *http.Request)
	// Limit wraps the bound socket for serving: the overload manager's
	// global connection limit counts admin connections unless
	// admin.ignore_global_conn_limit. Nil serves the socket as bound.
	Limit func(net.Listener) net.Listener
}

// Server serves the registry's endpoints over HTTP/1.1 and cleartext HTTP/2
// (Envoy's admin listener detects the codec too).
type Server struct {
	cfg      Config
	registry *Registry
	listener net.Listener // set by Listen, then read-only
	http     *http.Server // set by Listen, then read-only
	serving  atomic.Bool  // Serve has started; Shutdown waits for done

	logMu sync.Mutex // serialises access-log writes
	done  chan struct{}
}

// New returns a server for reg. Nothing is bound until Listen.
func New(cfg Config, reg *Registry) *Server {
	if cfg.Now == nil {
		cfg.Now = clock.Real().Now
	}
	if cfg.Warnf == nil {
		cfg.Warnf = func(string, ...any) {}
	}
	return &Server{cfg: cfg, registry: reg, done: make(chan struct{})}
}

// Listen binds the admin address. A port already in use is an error that
// names the address, so a second Legate on one admin port fails clearly.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("admin: cannot bind %s: %w", s.cfg.Address, err)
	}
	s.ListenOn(ln)
	return nil
}

// ListenOn makes the server serve on ln, a socket bound elsewhere (the admin
// socket a hot-restart parent passed on), instead of binding Address.
func (s *Server) ListenOn(ln net.Listener) {
	if !loopback(ln.Addr()) {
		s.cfg.Warnf("admin interface bound to non-loopback address %s: it allows destructive operations and exposes private information; bind it to 127.0.0.1 or a firewalled network", ln.Addr())
	}
	s.listener = ln
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	s.http = &http.Server{
		// Envoy's admin has no CSRF protection (envoy#2763): a web page
		// could POST /quitquitquit. Browser requests from another origin, or
		// naming another host (DNS rebinding), are refused before routing.
		Handler: refuseForeignHost(RefuseCrossOrigin(s, s.cfg.OnCrossOrigin),
			newHostPolicy(ln.Addr(), s.cfg.AllowedHosts), s.cfg.OnForeignHost),
		Protocols:         protocols,
		ReadHeaderTimeout: 30 * time.Second,
		// Room for a query of MaxRequestBytes plus headers, so that an
		// oversized query reaches the handler's 413 that names the limit.
		MaxHeaderBytes: MaxRequestBytes + 64<<10,
	}
}

// Listener is the bound admin socket, or nil before Listen.
func (s *Server) Listener() net.Listener { return s.listener }

// loopback reports whether a bound address can be reached only from this
// host. The bound address is checked, not the configured one, so
// "localhost" passes and "0.0.0.0" does not.
func loopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// Addr is the bound address (the real port when the configured one was 0).
func (s *Server) Addr() net.Addr {
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Serve answers requests until Shutdown. It owns the HTTP server goroutines.
func (s *Server) Serve() error {
	if s.listener == nil {
		return errors.New("admin: Serve before Listen")
	}
	s.serving.Store(true)
	defer close(s.done)
	ln := s.listener
	if s.cfg.Limit != nil {
		ln = s.cfg.Limit(ln)
	}
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes what is left (long streams included).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.listener == nil {
		return nil
	}
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	s.listener.Close() // in case Serve never ran
	if s.serving.Load() {
		<-s.done
	}
	return err
}

// ServeHTTP routes one request.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	w := &responseWriter{ResponseWriter: rw}
	defer func() {
		if s.cfg.AccessLog != nil {
			s.logAccess(r, w, start)
		}
	}()

	e, ok := s.registry.lookup(r.URL.Path)
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "invalid path. "+s.registry.HelpText())
		return
	}
	if e.Mutates && r.Method != http.MethodPost {
		// The spec's rule: a mutation requested with another method has no
		// effect and gets 400 (Envoy ≥ 1.10 says 405; the spec wins).
		s.cfg.Warnf("admin path %q mutates state, method=%s rather than POST", e.Path, r.Method)
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "Method "+r.Method+" not allowed, POST required.")
		return
	}
	q, err := requestQuery(r, !e.QueryOnly)
	if err != nil {
		if !refuseTooLarge(w, err) {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "unable to read the request body: "+err.Error())
		}
		return
	}
	e.Handle(w, r, q)
}

// responseWriter adds Envoy's default admin headers when the handler
// commits its status, and counts body bytes for the access log.
type responseWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	h := w.Header()
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/plain; charset=UTF-8")
	}
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache, max-age=0")
	}
	h.Add("X-Content-Type-Options", "nosniff")
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers push what they wrote.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController access to the connection.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logAccess writes Envoy's default access-log line for the request:
// [%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE%
// %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%
// "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"
func (s *Server) logAccess(r *http.Request, w *responseWriter, start time.Time) {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	dash := func(v string) string {
		if v == "" {
			return "-"
		}
		return v
	}
	received := r.ContentLength
	if received < 0 {
		received = 0
	}
	line := "[" + start.UTC().Format("2006-01-02T15:04:05.000Z") + "] \"" +
		r.Method + " " + r.URL.RequestURI() + " " + r.Proto + "\" " +
		strconv.Itoa(status) + " - " + strconv.FormatInt(received, 10) + " " +
		strconv.FormatInt(w.bytes, 10) + " " +
		strconv.FormatInt(s.cfg.Now().Sub(start).Milliseconds(), 10) + " - \"" +
		dash(r.Header.Get("X-Forwarded-For")) + "\" \"" + dash(r.UserAgent()) + "\" \"" +
		dash(r.Header.Get("X-Request-Id")) + "\" \"" + dash(r.Host) + "\" \"-\"\n"
	s.logMu.Lock()
	io.WriteString(s.cfg.AccessLog, line)
	s.logMu.Unlock()
}
