// Package tags implements Envoy's tag extraction: it turns a full stat name
// such as "cluster.web.upstream_rq_2xx" into a tag-extracted name
// ("cluster.upstream_rq_xx") and an ordered list of tags
// (envoy.response_code_class=2, envoy.cluster_name=web). The Prometheus
// renderer uses the result for metric names and labels, and sinks use it for
// tagged output.
//
// It reproduces Envoy's TagProducerImpl: the default regex and tokenized
// extractors from well_known_names.cc in their registration order, the
// first-token prefix and substring hints that decide which extractors run,
// bootstrap stats_config.stats_tags and use_all_default_tags, and the
// --stats-tag fixed tags.
//
// Fields.Extract gives the same result for all names prefix+field of one
// stats struct at once: each extractor's result is split into what the
// prefix decides and what the field decides, the field part is shared by
// every prefix of the same shape (a Template), and a prefix where an
// extractor could match across the boundary falls back to Extract per name.
// TestFieldsExtractMatchesExtract and FuzzFieldsExtract check the two agree.
//
// Concurrency: a Producer is built once by New and is immutable afterwards;
// Extract may be called from any number of goroutines at once. Extract takes
// no lock and, for a name that no regex extractor matches, allocates at most
// the returned name. A Fields caches templates under its own mutex and is
// safe for concurrent use; Templates are immutable.
package tags
