package config

import (
	"fmt"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/legateproxy/legate/bootstrap"
)

// hcmFields decides every field of HttpConnectionManager, as bootstrap's table decides the
// bootstrap's messages: Implemented fields are read (by HTTPConnectionManagerFromProto or, for
// rds, scoped_routes, config_discovery filters and tracing, by the network filter's parser,
// which takes them out into HTTPConnectionManager's fields before converting, for httpproxy
// and tracing); Ignored ones only change operational output and are accepted with a warning;
// Refused ones would change traffic or security and stop the configuration. A field a newer
// API adds is refused until it is decided here. The table in doc.go says why for each;
// TestHCMDocTable holds the two equal.
var hcmFields = map[protoreflect.Name]bootstrap.Support{
	"codec_type": bootstrap.Implemented, "stat_prefix": bootstrap.Implemented, "rds": bootstrap.Implemented,
	"route_config": bootstrap.Implemented, "scoped_routes": bootstrap.Implemented,
	"http_filters": bootstrap.Implemented, "common_http_protocol_options": bootstrap.Implemented,
	"http2_protocol_options": bootstrap.Implemented, "server_name": bootstrap.Implemented,
	"server_header_transformation": bootstrap.Implemented, "max_request_headers_kb": bootstrap.Implemented,
	"stream_idle_timeout": bootstrap.Implemented, "request_timeout": bootstrap.Implemented,
	"request_headers_timeout": bootstrap.Implemented, "drain_timeout": bootstrap.Implemented,
	"access_log": bootstrap.Implemented, "use_remote_address": bootstrap.Implemented,
	"xff_num_trusted_hops": bootstrap.Implemented, "skip_xff_append": bootstrap.Implemented,
	"generate_request_id": bootstrap.Implemented, "preserve_external_request_id": bootstrap.Implemented,
	"always_set_request_id_in_response": bootstrap.Implemented, "strip_any_host_port": bootstrap.Implemented,
	"upgrade_configs":       bootstrap.Implemented, // the converter decides (upgrade support)
	"http_protocol_options": bootstrap.Implemented, // each of its fields is decided in http1Fields

	"access_log_flush_interval": bootstrap.Ignored, "flush_access_log_on_new_request": bootstrap.Ignored,
	"access_log_options": bootstrap.Ignored, "record_route_resolution_stats": bootstrap.Ignored,
	"drain_timeout_jitter": bootstrap.Ignored, "delayed_close_timeout": bootstrap.Ignored,
	"stream_flush_timeout": bootstrap.Ignored,

	"tracing": bootstrap.Implemented, "add_user_agent": bootstrap.Refused,
	"http1_safe_max_connection_duration": bootstrap.Refused, "http3_protocol_options": bootstrap.Refused,
	"scheme_header_transformation": bootstrap.Refused, "original_ip_detection_extensions": bootstrap.Refused,
	"early_header_mutation_extensions": bootstrap.Refused, "internal_address_config": bootstrap.Refused,
	"via": bootstrap.Refused, "forward_client_cert_details": bootstrap.Refused,
	"set_current_client_cert_details": bootstrap.Refused, "forward_client_cert_matcher": bootstrap.Refused,
	"proxy_100_continue": bootstrap.Refused, "represent_ipv4_remote_address_as_ipv4_mapped_ipv6": bootstrap.Refused,
	"normalize_path": bootstrap.Refused, "merge_slashes": bootstrap.Refused,
	"path_with_escaped_slashes_action": bootstrap.Refused, "request_id_extension": bootstrap.Refused,
	"local_reply_config": bootstrap.Refused, "strip_matching_host_port": bootstrap.Refused,
	"stream_error_on_invalid_http_message": bootstrap.Refused, "path_normalization_options": bootstrap.Refused,
	"strip_trailing_host_dot": bootstrap.Refused, "proxy_status_config": bootstrap.Refused,
	"typed_header_validation_config": bootstrap.Refused, "append_x_forwarded_port": bootstrap.Refused,
	"append_local_overload": bootstrap.Refused, "add_proxy_protocol_connection_state": bootstrap.Implemented, // true only (the converter refuses false)
	"forward_proto_config": bootstrap.Refused,
}

// http1Fields decides the fields of the connection manager's http_protocol_options
// (core.v3.Http1ProtocolOptions, read by HTTP1OptionsFromProto). send_fully_qualified_url is
// about requests Legate sends, so it means nothing here, as in Envoy.
var http1Fields = map[protoreflect.Name]bootstrap.Support{
	"allow_absolute_url": bootstrap.Implemented, "accept_http_10": bootstrap.Implemented,
	"default_host_for_http_10": bootstrap.Implemented, "header_key_format": bootstrap.Implemented,
	"enable_trailers": bootstrap.Implemented, "allow_chunked_length": bootstrap.Implemented,
	"send_fully_qualified_url": bootstrap.Implemented,
}

// auditHCM refuses the set fields of p that Legate does not implement (the first, in field
// order) and returns the paths of those it ignores.
func auditHCM(p *hcmv3.HttpConnectionManager) (ignored []string, err error) {
	err = auditMessage("", p.ProtoReflect(), hcmFields, &ignored)
	if err == nil && p.GetHttpProtocolOptions() != nil {
		err = auditMessage("http_protocol_options.", p.GetHttpProtocolOptions().ProtoReflect(), http1Fields, &ignored)
	}
	return ignored, err
}

// auditMessage applies a field table to the set fields of m; a field missing from the table
// is refused.
func auditMessage(prefix string, m protoreflect.Message, table map[protoreflect.Name]bootstrap.Support, ignored *[]string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		s, ok := table[fd.Name()]
		switch {
		case !ok || s == bootstrap.Refused:
			err = fmt.Errorf("%w: %s%s: set; %s", ErrHTTPConnectionManager, prefix, fd.Name(), hcmUnsupportedFieldRuleText)
			return false
		case s == bootstrap.Ignored:
			*ignored = append(*ignored, prefix+string(fd.Name()))
		}
		return true
	})
	return err
}
