package configdump

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/pbjson"
)

// EndpointKey is the tracker key of the EndpointsConfigDump. Envoy adds that
// dump only when the request asks for include_eds, so Render skips the
// tracker registered under this key otherwise.
const EndpointKey = "endpoint"

// Content types of Render's responses, as Envoy sends them.
const (
	ContentTypeJSON = "application/json"
	ContentTypeText = "text/plain"
)

// A Tracker produces one top-level dump message of /config_dump
// (BootstrapConfigDump, ClustersConfigDump, ...). It implements one entry of
// Envoy's ConfigTracker callback map.
type Tracker struct {
	// Key orders the dump: Render walks trackers in lexicographic key order
	// ("bootstrap", "clusters", "endpoint", "listeners", "route_scopes",
	// "routes", "secrets", ...).
	Key string
	// Dump returns the tracker's dump message, or nil when the dump does not
	// exist yet (Envoy's ECDS dumps appear only once a subscription of
	// their kind exists; the endpoint dump only with an active cluster).
	//
	// nameMatch is never nil. The tracker applies it itself, as §6.4 of the
	// admin reference lists: it calls nameMatch with each resource's name
	// (Cluster.name, the listener's name, RouteConfiguration.name,
	// ScopedRouteConfiguration.name, Secret.name,
	// ClusterLoadAssignment.cluster_name, TypedExtensionConfig.name) and
	// leaves out those for which it returns false. The bootstrap dump and
	// listener error-state entries ignore it. Without name_regex it matches
	// every name.
	//
	// Dump is called from Render's goroutine, possibly concurrently with
	// other Renders. Render never modifies the returned message (it works on
	// a copy), so Dump may return messages it shares.
	Dump func(nameMatch func(string) bool) proto.Message
}

// Registry holds the trackers of one server. The zero value is an empty
// registry ready for use; it is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	trackers map[string]Tracker // guarded by mu
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Add registers t. A key may be registered once.
func (r *Registry) Add(t Tracker) error {
	if t.Key == "" {
		return errors.New("configdump: tracker key is empty")
	}
	if t.Dump == nil {
		return fmt.Errorf("configdump: tracker %q: Dump is nil", t.Key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.trackers[t.Key]; dup {
		return fmt.Errorf("configdump: tracker %q is already registered", t.Key)
	}
	if r.trackers == nil {
		r.trackers = make(map[string]Tracker)
	}
	r.trackers[t.Key] = t
	return nil
}

// Remove unregisters the tracker with the given key, if any.
func (r *Registry) Remove(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.trackers, key)
}

// sorted returns the trackers to walk, in key order.
func (r *Registry) sorted(includeEDS bool) []Tracker {
	r.mu.Lock()
	list := make([]Tracker, 0, len(r.trackers))
	for _, t := range r.trackers {
		if t.Key == EndpointKey && !includeEDS {
			continue
		}
		list = append(list, t)
	}
	r.mu.Unlock()
	slices.SortFunc(list, func(a, b Tracker) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return list
}

// Request holds the query parameters of /config_dump. An empty string means
// the parameter is absent (Envoy treats an empty resource, mask or
// name_regex as not given).
type Request struct {
	Resource   string // resource=: a repeated field of a dump to list element by element
	Mask       string // mask=: a FieldMask in string form, comma-separated paths
	NameRegex  string // name_regex=: RE2 full match on resource names
	IncludeEDS bool   // include_eds: also dump endpoints
}

// RequestError is a /config_dump failure that Envoy answers with a plain
// text body. Error returns the body exactly.
type RequestError struct {
	Status int
	Body   string
}

func (e *RequestError) Error() string { return e.Body }

// Render builds the ConfigDump for req and writes the response body to w:
// on success pretty proto JSON with defaults omitted (status 200,
// application/json); on failure the exact error body of the admin
// reference §6.7 (text/plain, no trailing newline) and a *RequestError.
// It applies name_regex (§6.4), resource (§6.5), mask (§6.6) and redaction
// of sensitive fields (§6.8). The body is written in one Write call after
// the status is known. If the dump cannot be printed (an Any of a type that
// is not linked in), Render returns 500 with the error text as the body.
func (r *Registry) Render(w io.Writer, req Request) (status int, contentType string, err error) {
	dump, err := r.build(req)
	if err == nil {
		var buf bytes.Buffer
		if err = pbjson.Write(&buf, dump, pbjson.OmitDefaults); err == nil {
			_, err = w.Write(buf.Bytes())
			return http.StatusOK, ContentTypeJSON, err
		}
		err = &RequestError{Status: http.StatusInternalServerError, Body: err.Error()}
	}
	var re *RequestError
	if !errors.As(err, &re) {
		re = &RequestError{Status: http.StatusInternalServerError, Body: err.Error()}
	}
	if _, werr := io.WriteString(w, re.Body); werr != nil {
		return re.Status, ContentTypeText, werr
	}
	return re.Status, ContentTypeText, re
}

// build assembles the redacted ConfigDump for req.
func (r *Registry) build(req Request) (*adminv3.ConfigDump, error) {
	match, err := compileNameRegex(req.NameRegex)
	if err != nil {
		return nil, err
	}
	trackers := r.sorted(req.IncludeEDS)
	if req.Resource != "" {
		return resourceDump(trackers, req, match)
	}
	return wholeDump(trackers, req, match)
}

// wholeDump packs every tracker's dump, masked when req.Mask is set. Dumps
// the mask does not fit are skipped; if none fits, the request fails.
func wholeDump(trackers []Tracker, req Request, match func(string) bool) (*adminv3.ConfigDump, error) {
	var paths []string
	if req.Mask != "" {
		paths = splitMask(req.Mask)
	}
	dump := &adminv3.ConfigDump{}
	for _, t := range trackers {
		m := t.Dump(match)
		if m == nil {
			continue
		}
		m = proto.Clone(m)
		if req.Mask != "" && !trimChecked(m.ProtoReflect(), paths) {
			continue
		}
		a, err := pack(m)
		if err != nil {
			return nil, fmt.Errorf("tracker %q: %w", t.Key, err)
		}
		dump.Configs = append(dump.Configs, a)
	}
	if len(dump.Configs) == 0 && req.Mask != "" {
		return nil, &RequestError{
			Status: http.StatusBadRequest,
			Body:   "FieldMask " + req.Mask + " could not be successfully applied to any configs.",
		}
	}
	return dump, nil
}

// resourceDump lists the elements of the first dump that has a field named
// req.Resource, each packed in its own Any and masked when req.Mask is set.
func resourceDump(trackers []Tracker, req Request, match func(string) bool) (*adminv3.ConfigDump, error) {
	var paths []string
	if req.Mask != "" {
		paths = splitMask(req.Mask)
	}
	for _, t := range trackers {
		m := t.Dump(match)
		if m == nil {
			continue
		}
		fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(req.Resource))
		if fd == nil {
			continue
		}
		if !fd.IsList() {
			return nil, &RequestError{
				Status: http.StatusBadRequest,
				Body:   fmt.Sprintf("%s is not a repeated field. Use ?mask=%s to get only this field", fd.Name(), fd.Name()),
			}
		}
		if fd.Message() == nil {
			return nil, &RequestError{
				Status: http.StatusBadRequest,
				Body:   fmt.Sprintf("%s is not a repeated message field", fd.Name()),
			}
		}
		list := m.ProtoReflect().Get(fd).List()
		dump := &adminv3.ConfigDump{}
		for i := range list.Len() {
			elem := proto.Clone(list.Get(i).Message().Interface())
			if req.Mask != "" && !trimResource(elem.ProtoReflect(), paths) {
				return nil, &RequestError{
					Status: http.StatusBadRequest,
					Body:   "FieldMask " + maskDebugString(paths) + " could not be successfully used.",
				}
			}
			a, err := pack(elem)
			if err != nil {
				return nil, fmt.Errorf("tracker %q: %s[%d]: %w", t.Key, fd.Name(), i, err)
			}
			dump.Configs = append(dump.Configs, a)
		}
		return dump, nil
	}
	return nil, &RequestError{
		Status: http.StatusNotFound,
		Body:   req.Resource + " not found in config dump",
	}
}

// pack redacts m in place and packs it into an Any with the
// type.googleapis.com/ prefix, as Envoy's PackFrom does.
func pack(m proto.Message) (*anypb.Any, error) {
	Redact(m)
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}
