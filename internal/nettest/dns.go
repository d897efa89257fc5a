package nettest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// DNSServer is a real DNS server on 127.0.0.1 (UDP, or TCP only with StartDNSTCP) answering
// from a table the test sets.
// Names it has no records for get an empty answer, or NXDOMAIN when listed by NXDomain.
type DNSServer struct {
	// Addr is the server's "127.0.0.1:port".
	Addr string

	mu      sync.Mutex
	records map[string][]dns.RR // by "name. TYPE"
	nx      map[string]bool
	fail    bool
	queries map[string]int // by name, without the final dot
	srv     *dns.Server
}

// StartDNS starts a DNS server that the test's cleanup stops.
func StartDNS(t testing.TB) *DNSServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveDNS(t, pc.LocalAddr().String(), &dns.Server{PacketConn: pc})
}

// StartDNSTCP starts a DNS server that listens on TCP only, so that an answer proves the
// query went over TCP; the test's cleanup stops it.
func StartDNSTCP(t testing.TB) *DNSServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveDNS(t, ln.Addr().String(), &dns.Server{Listener: ln})
}

// serveDNS runs srv, answering from a new table, until the test's cleanup.
func serveDNS(t testing.TB, addr string, srv *dns.Server) *DNSServer {
	s := &DNSServer{Addr: addr, records: map[string][]dns.RR{}, nx: map[string]bool{}, queries: map[string]int{}, srv: srv}
	started := make(chan struct{})
	srv.Handler, srv.NotifyStartedFunc = s, func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return s
}

// Set replaces the records of name ("host.test.") with rrs, in zone-file form
// ("host.test. 30 IN A 127.0.0.1"). It panics on a malformed record (a test's mistake).
func (s *DNSServer) Set(name string, rrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.records {
		if strings.HasPrefix(k, name+" ") {
			delete(s.records, k)
		}
	}
	for _, r := range rrs {
		rr, err := dns.NewRR(r)
		if err != nil {
			panic(err)
		}
		key := name + " " + dns.TypeToString[rr.Header().Rrtype]
		s.records[key] = append(s.records[key], rr)
	}
}

// NXDomain makes name ("host.test.") answer NXDOMAIN.
func (s *DNSServer) NXDomain(name string) { s.mu.Lock(); s.nx[name] = true; s.mu.Unlock() }

// SetFail makes every answer SERVFAIL while f holds.
func (s *DNSServer) SetFail(f bool) { s.mu.Lock(); s.fail = f; s.mu.Unlock() }

// Queries returns how many questions name ("host.test", any type) got.
func (s *DNSServer) Queries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[name]
}

// Names returns the names asked (without the final dot), each once, in no order.
func (s *DNSServer) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.queries {
		out = append(out, n)
	}
	return out
}

// ServeDNS answers one query from the table.
func (s *DNSServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(r)
	q := r.Question[0]
	s.queries[strings.TrimSuffix(q.Name, ".")]++
	switch {
	case s.fail:
		m.Rcode = dns.RcodeServerFailure
	case s.nx[q.Name]:
		m.Rcode = dns.RcodeNameError
	default:
		m.Answer = s.records[q.Name+" "+dns.TypeToString[q.Qtype]]
	}
	w.WriteMsg(m)
}
