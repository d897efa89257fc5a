// Package bootstrap reads Envoy's v3 bootstrap file, as Envoy does: YAML or JSON chosen by the
// file extension, `--config-yaml` merged over the file with protobuf MergeFrom semantics, a few
// v2 spellings rewritten into their v3 form, strict decoding into go-control-plane's
// envoy.config.bootstrap.v3.Bootstrap, and protoc-gen-validate rules checked on the result and
// on every typed_config (Any) inside it.
//
// Strict means Envoy's strictness, no more: YAML is read as yaml-cpp reads it (yaml.go) and the
// forms protobuf's legacy JSON parser accepts are rewritten into canonical proto3 JSON before
// decoding (lenient.go): single values for lists, enum names in any case, Duration and wrapper
// objects, TypedStructs opened into the message they describe, a key repeated in a JSON
// object merged as the legacy parser merges it (repeat.go). Unknown fields, unknown type
// URLs (v2 ones included) and an Any without "@type" stay errors. The extensions Legate
// implements are those of the extension registry (internal/registry, built by
// extensions.New), whose packages link their config messages.
//
// Every problem is reported as a FieldError naming the file, the field path and the rule, for
// example `envoy.yaml: static_resources.clusters[0].connect_timeout: invalid duration "5x"`.
//
// Concurrency: the package has no state. Load and Parse may be called from any goroutine; the
// only shared data is the protobuf type registry, filled at init by the imports in
// extensions.go and read-only afterwards.
package bootstrap
