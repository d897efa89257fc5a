package nettest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// DNSServer is a real DNS server on 127.0.0.1 (UDP) answering from a table the test sets.
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
	s := &DNSServer{Addr: pc.LocalAddr().String(), records: map[string][]dns.RR{}, nx: map[string]bool{}, queries: map[string]int{}}
	started := make(chan struct{})
	s.srv = &dns.Server{PacketConn: pc, Handler: s, NotifyStartedFunc: func() { close(started) }}
	go s.srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { s.srv.Shutdown() })
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
