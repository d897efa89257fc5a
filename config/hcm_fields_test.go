package config

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/bootstrap"
)

// minimalHCM is a connection manager HTTPConnectionManagerFromProto accepts.
func minimalHCM() *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		StatPrefix:     "h",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{}},
	}
}

// setSomething gives fd a value that is not its default, so that the field counts as set.
func setSomething(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsList():
		l := m.Mutable(fd).List()
		l.Append(l.NewElement())
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		mp.Set(protoreflect.ValueOfString("k").MapKey(), mp.NewValue())
	case fd.Kind() == protoreflect.MessageKind:
		m.Set(fd, m.NewField(fd))
	case fd.Kind() == protoreflect.BoolKind:
		m.Set(fd, protoreflect.ValueOfBool(true))
	case fd.Kind() == protoreflect.EnumKind:
		m.Set(fd, protoreflect.ValueOfEnum(1))
	case fd.Kind() == protoreflect.StringKind:
		m.Set(fd, protoreflect.ValueOfString("x"))
	case fd.Kind() == protoreflect.Uint32Kind:
		m.Set(fd, protoreflect.ValueOfUint32(1))
	default:
		panic("setSomething: kind " + fd.Kind().String())
	}
}

// TestHCMFieldsDecided: every field of HttpConnectionManager has a decision, so that one a
// newer API adds is noticed (it is refused until then).
func TestHCMFieldsDecided(t *testing.T) {
	fs := (&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor().Fields()
	for i := range fs.Len() {
		if _, ok := hcmFields[fs.Get(i).Name()]; !ok {
			t.Errorf("HttpConnectionManager.%s has no decision in hcmFields", fs.Get(i).Name())
		}
	}
	for name := range hcmFields {
		if fs.ByName(name) == nil {
			t.Errorf("hcmFields decides %s, which HttpConnectionManager does not have", name)
		}
	}
}

// TestHCMRefusedFields: each refused field stops the conversion with its name and "not
// implemented by Legate", and each ignored one is listed for the warning.
func TestHCMRefusedFields(t *testing.T) {
	fs := (&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor().Fields()
	for name, s := range hcmFields {
		if s == bootstrap.Implemented {
			continue
		}
		t.Run(string(name), func(t *testing.T) {
			p := minimalHCM()
			setSomething(p.ProtoReflect(), fs.ByName(name))
			h, err := HTTPConnectionManagerFromProto(p)
			if s == bootstrap.Refused {
				want := string(name) + ": set; not implemented by Legate"
				if err == nil || !strings.HasSuffix(err.Error(), want) {
					t.Errorf("error = %v; want one ending in %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("error = %v; want the ignored field accepted", err)
			}
			if !slices.Equal(h.Ignored, []string{string(name)}) {
				t.Errorf("Ignored = %v; want [%s]", h.Ignored, name)
			}
		})
	}
	// http_protocol_options: the options Legate implements load; the others are refused.
	p := minimalHCM()
	p.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true}
	if h, err := HTTPConnectionManagerFromProto(p); err != nil || !h.HTTP1.AcceptHTTP10 {
		t.Errorf("accept_http_10: %v", err)
	}
	p.HttpProtocolOptions.AllowCustomMethods = true
	want := "http_protocol_options.allow_custom_methods: set; not implemented by Legate"
	if _, err := HTTPConnectionManagerFromProto(p); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("allow_custom_methods error = %v; want one ending in %q", err, want)
	}
}

// TestHCMProxyProtocolState: add_proxy_protocol_connection_state true (Envoy's default,
// what Legate does) loads; false is refused with its path.
func TestHCMProxyProtocolState(t *testing.T) {
	p := minimalHCM()
	p.AddProxyProtocolConnectionState = wrapperspb.Bool(true)
	if _, err := HTTPConnectionManagerFromProto(p); err != nil {
		t.Errorf("true: %v; want it loaded", err)
	}
	p.AddProxyProtocolConnectionState = wrapperspb.Bool(false)
	const want = "add_proxy_protocol_connection_state: false: not implemented by Legate"
	if _, err := HTTPConnectionManagerFromProto(p); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("false: %v; want an error containing %q", err, want)
	}
}

// TestHCMDocTable holds doc.go's connection manager table equal to hcmFields.
func TestHCMDocTable(t *testing.T) {
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^//\s+\|\s*HttpConnectionManager\s*\|\s*([a-z0-9_]+)\s*\|\s*(ignored|refused)\s*\|`)
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		got[m[1]] = m[2]
	}
	want := map[string]string{}
	for f, s := range hcmFields {
		switch s {
		case bootstrap.Ignored:
			want[string(f)] = "ignored"
		case bootstrap.Refused:
			want[string(f)] = "refused"
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("doc.go HttpConnectionManager rows (-hcmFields +doc.go):\n%s", diff)
	}
}
