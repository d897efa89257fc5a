package compressor

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// Name and the type URLs select the filter in http_filters (TypeURL) and in
// typed_per_filter_config (PerRouteTypeURL).
const (
	Name            = "envoy.filters.http.compressor"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.CompressorPerRoute"
)

// defaultMinLength is the smallest body compressed when min_content_length is unset.
const defaultMinLength = 30

// defaultContentTypes are the media types compressed when content_type is empty.
var defaultContentTypes = []string{
	"text/html", "text/plain", "text/css", "application/javascript", "application/x-javascript",
	"text/javascript", "text/x-javascript", "text/ecmascript", "text/js", "text/jscript",
	"text/x-js", "application/ecmascript", "application/x-json", "application/xml",
	"application/json", "image/svg+xml", "text/xml", "application/xhtml+xml",
}

// flag is a compiled RuntimeFeatureFlag: on by default unless the runtime says otherwise.
type flag struct {
	key string
	def bool
}

func flagFromProto(p *corev3.RuntimeFeatureFlag) flag {
	if p == nil {
		return flag{def: true}
	}
	return flag{key: p.GetRuntimeKey(), def: p.GetDefaultValue().GetValue()}
}

func (f flag) enabled(ctx *filter.Context) bool {
	def := uint64(0)
	if f.def {
		def = 1
	}
	return ctx.RuntimeValue(f.key, def) != 0
}

// direction is a compiled common direction config.
type direction struct {
	enabled   flag
	minLength int64
	types     map[string]bool // lower case media types; empty allows every one
}

func directionFromProto(p *compressorv3.Compressor_CommonDirectionConfig, path string) (direction, error) {
	d := direction{enabled: flagFromProto(p.GetEnabled()), minLength: defaultMinLength}
	if len(p.GetContentTypeMatcher()) > 0 {
		return d, fmt.Errorf("%s.content_type_matcher: not implemented by Legate (content_type is)", path)
	}
	if v := p.GetMinContentLength(); v != nil {
		d.minLength = int64(v.GetValue())
	}
	d.types = contentTypes(p.GetContentType())
	return d, nil
}

func contentTypes(types []string) map[string]bool {
	if len(types) == 0 {
		types = defaultContentTypes
	}
	m := make(map[string]bool, len(types))
	for _, t := range types {
		m[strings.ToLower(t)] = true
	}
	return m
}

// response is the compiled response direction.
type response struct {
	direction
	disableOnEtag  bool
	weakenEtag     bool
	removeAccept   bool
	uncompressible map[int]bool
	legacyStats    bool // response_direction_config unset: response stats have no "response." prefix
}

// config is a compiled Compressor.
type config struct {
	lib      *library
	request  *direction // nil: request compression off
	response response
}

// compile converts the filter's configuration.
func compile(pb *compressorv3.Compressor) (*config, error) {
	if pb.GetChooseFirst() {
		return nil, fmt.Errorf("%s: choose_first: true not implemented by Legate", Name)
	}
	lib, err := libraryFromProto(pb.GetCompressorLibrary(), "compressor_library")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &config{lib: lib}
	if rd := pb.GetRequestDirectionConfig(); rd != nil {
		d, err := directionFromProto(rd.GetCommonConfig(), "request_direction_config.common_config")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		c.request = &d
	}
	if c.response, err = responseFromProto(pb); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return c, nil
}

// responseFromProto compiles response_direction_config, or the deprecated top-level fields
// without it (as Envoy).
func responseFromProto(pb *compressorv3.Compressor) (response, error) {
	rd := pb.GetResponseDirectionConfig()
	if rd == nil {
		r := response{
			direction:     direction{enabled: flagFromProto(pb.GetRuntimeEnabled()), minLength: defaultMinLength, types: contentTypes(pb.GetContentType())},
			disableOnEtag: pb.GetDisableOnEtagHeader(), removeAccept: pb.GetRemoveAcceptEncodingHeader(), legacyStats: true,
		}
		if v := pb.GetContentLength(); v != nil && v.GetValue() > 0 {
			r.minLength = int64(v.GetValue())
		}
		return r, nil
	}
	if rd.GetStatusHeaderEnabled() {
		return response{}, fmt.Errorf("response_direction_config.status_header_enabled: true not implemented by Legate")
	}
	d, err := directionFromProto(rd.GetCommonConfig(), "response_direction_config.common_config")
	if err != nil {
		return response{}, err
	}
	r := response{direction: d, disableOnEtag: rd.GetDisableOnEtagHeader(), weakenEtag: rd.GetWeakenEtagOnCompress(),
		removeAccept: rd.GetRemoveAcceptEncodingHeader()}
	for _, code := range rd.GetUncompressibleResponseCodes() {
		if r.uncompressible == nil {
			r.uncompressible = map[int]bool{}
		}
		r.uncompressible[int(code)] = true
	}
	return r, nil
}

// PerRoute is a compiled CompressorPerRoute.
type PerRoute struct {
	// Disabled turns response compression off for the route.
	Disabled bool
	// RemoveAccept, when set, overrides remove_accept_encoding_header.
	RemoveAccept *bool
	// lib, when set, compresses the route's responses with another library.
	lib *library
}

// PerRouteFromAny compiles a typed_per_filter_config entry.
func PerRouteFromAny(cfg *anypb.Any) (*PerRoute, error) {
	var pb compressorv3.CompressorPerRoute
	if err := filter.Decode(cfg, PerRouteTypeURL, Name+": typed_per_filter_config", &pb); err != nil {
		return nil, err
	}
	if pb.GetDisabled() {
		return &PerRoute{Disabled: true}, nil
	}
	o := pb.GetOverrides()
	p := &PerRoute{}
	if v := o.GetResponseDirectionConfig().GetRemoveAcceptEncodingHeader(); v != nil {
		b := v.GetValue()
		p.RemoveAccept = &b
	}
	if tc := o.GetCompressorLibrary(); tc != nil {
		lib, err := libraryFromProto(tc, "overrides.compressor_library")
		if err != nil {
			return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
		}
		p.lib = lib
	}
	return p, nil
}
