package tags

import "testing"

func BenchmarkExtract(b *testing.B) {
	p := mustNew(b, Config{})
	for _, name := range []string{
		"cluster.service_a.upstream_cx_total",
		"cluster.service_a.upstream_rq_200",
		"listener.0.0.0.0_10000.http.ingress_http.downstream_rq_2xx",
		"server.uptime",
	} {
		b.Run(name, func(b *testing.B) {
			tags := make([]Tag, 0, 8)
			b.ReportAllocs()
			for b.Loop() {
				_, tags = p.Extract(name, tags[:0])
			}
		})
	}
}
