package bootstrap

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestFieldNotesComplete checks that every field of every audited message has an explicit
// decision, so that a field only becomes refused by default when a newer API adds it.
func TestFieldNotesComplete(t *testing.T) {
	for name, notes := range fieldNotes {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
		if err != nil {
			t.Errorf("audited message %s: %v", name, err)
			continue
		}
		md := d.(protoreflect.MessageDescriptor)
		var missing, extra []string
		fs := md.Fields()
		for i := 0; i < fs.Len(); i++ {
			if _, ok := notes[fs.Get(i).Name()]; !ok {
				missing = append(missing, string(fs.Get(i).Name()))
			}
		}
		for f := range notes {
			if fs.ByName(f) == nil {
				extra = append(extra, string(f))
			}
		}
		if len(missing) > 0 || len(extra) > 0 {
			t.Errorf("%s: fields without a decision: %s; decisions for fields it does not have: %s", name, strings.Join(missing, ", "), strings.Join(extra, ", "))
		}
	}
}

func TestAudit(t *testing.T) {
	l, err := Parse([]byte(`
tracing: {}
header_prefix: x-acme
static_resources:
  clusters:
  - name: web
    track_cluster_stats: {request_response_sizes: true}
    filters: [{name: f}]
`), FormatYAML, Options{Name: "b.yaml"})
	if err == nil {
		t.Fatalf("Parse succeeded with warnings %q; want the refusals", l.Warnings)
	}
	want := []string{
		"b.yaml: header_prefix: set; not implemented by Legate",
		"b.yaml: static_resources.clusters[0].filters: set; not implemented by Legate",
	}
	got := strings.Split(err.Error(), "\n")
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse error lines (-want +got):\n%s", diff)
	}
	ok, err := Parse([]byte("watchdogs: {}\nstatic_resources: {clusters: [{name: web, track_cluster_stats: {}}]}"), FormatYAML, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, n := range Audit("", ok.Bootstrap) {
		notes = append(notes, n.String())
	}
	wantNotes := []string{
		"static_resources.clusters[0].track_cluster_stats: set, but not implemented by Legate; ignored (it does not change how traffic is handled)",
		"watchdogs: set, but not implemented by Legate; ignored (it does not change how traffic is handled)",
	}
	slices.Sort(notes)
	if diff := cmp.Diff(wantNotes, notes); diff != "" {
		t.Errorf("Audit (-want +got):\n%s", diff)
	}
}
