package e2e

import (
	"bufio"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// statsdLines collects every line a statsd collector receives and reports each to found.
type statsdLines struct {
	lines chan string
}

func (s *statsdLines) add(payload string) {
	for _, l := range strings.Split(strings.TrimSuffix(payload, "\n"), "\n") {
		s.lines <- l
	}
}

// waitFor reads lines until one matches re (10 s at most), checking that each is a statsd line.
func (s *statsdLines) waitFor(t *testing.T, what string, re *regexp.Regexp) {
	t.Helper()
	line := regexp.MustCompile(`^[A-Za-z0-9_.\-]+:([0-9]+\|(c|g|ms)|[0-9.e-]+\|h)(\|#[^|]*)?$`)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l := <-s.lines:
			if !line.MatchString(l) {
				t.Errorf("%s: %q is not a statsd line", what, l)
			}
			if re.MatchString(l) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no line matching %s within 10s", what, re)
		}
	}
}

func udpStatsd(t *testing.T) (string, *statsdLines) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &statsdLines{lines: make(chan string, 4096)}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.add(string(buf[:n]))
		}
	}()
	return pc.LocalAddr().String(), s
}

func tcpStatsd(t *testing.T) (string, *statsdLines) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &statsdLines{lines: make(chan string, 4096)}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				sc := bufio.NewScanner(nc)
				for sc.Scan() {
					s.lines <- sc.Text()
				}
			}()
		}
	}()
	return ln.Addr().String(), s
}

// TestStatsdSinks runs the binary with a statsd sink over UDP, a DogStatsD sink and a statsd
// sink over TCP to a static cluster, flushing every 100 ms, and checks that a request's
// upstream_rq_time value (|ms) and upstream_rq_200 delta reach each collector as Envoy names them: full name over UDP and TCP
// (prefix "tcp" there); for DogStatsD the tag-extracted name with the response code and
// cluster tags that Envoy's default extractors take out of it.
func TestStatsdSinks(t *testing.T) {
	udpAddr, udp := udpStatsd(t)
	dogAddr, dog := udpStatsd(t)
	tcpAddr, tcp := tcpStatsd(t)
	up := named(t, "up")
	port := func(a string) string { _, p, _ := net.SplitHostPort(a); return p }
	cfg := exampleBootstrap(exampleHCM("ingress_http", routeAllToUp, ""), exampleCluster("up", "", addrOf(up)),
		exampleCluster("statsd_tcp", "", tcpAddr)) + `
stats_flush_interval: 0.1s
stats_sinks:
- name: envoy.stat_sinks.statsd
  typed_config:
    "@type": type.googleapis.com/envoy.config.metrics.v3.StatsdSink
    address: {socket_address: {address: 127.0.0.1, port_value: ` + port(udpAddr) + `}}
- name: envoy.stat_sinks.dog_statsd
  typed_config:
    "@type": type.googleapis.com/envoy.config.metrics.v3.DogStatsdSink
    address: {socket_address: {address: 127.0.0.1, port_value: ` + port(dogAddr) + `}}
    max_bytes_per_datagram: 1400
- name: envoy.stat_sinks.statsd
  typed_config:
    "@type": type.googleapis.com/envoy.config.metrics.v3.StatsdSink
    tcp_cluster_name: statsd_tcp
    prefix: tcp
`
	p := start(t, "-c", writeConfig(t, cfg))
	expectBody(t, noRedirect, "http://"+p.listenerAddr("example")+"/x", http.StatusOK, "up /x")
	udp.waitFor(t, "statsd UDP", regexp.MustCompile(`^envoy\.cluster\.up\.upstream_rq_time:[0-9]+\|ms$`))
	udp.waitFor(t, "statsd UDP", regexp.MustCompile(`^envoy\.cluster\.up\.upstream_rq_200:1\|c$`))
	dog.waitFor(t, "dog_statsd", regexp.MustCompile(`^envoy\.cluster\.upstream_rq_time:[0-9]+\|ms\|#envoy\.cluster_name:up$`))
	dog.waitFor(t, "dog_statsd", regexp.MustCompile(`^envoy\.cluster\.upstream_rq:1\|c\|#envoy\.response_code:200,envoy\.cluster_name:up$`))
	tcp.waitFor(t, "statsd TCP", regexp.MustCompile(`^tcp\.cluster\.up\.upstream_rq_time:[0-9]+\|ms$`))
	tcp.waitFor(t, "statsd TCP", regexp.MustCompile(`^tcp\.cluster\.up\.upstream_rq_200:1\|c$`))
}
