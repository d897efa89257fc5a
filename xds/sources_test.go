package xds

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestControlPlaneIdentifier: control_plane.identifier follows the control_plane of gRPC
// responses (ADS and per-type streams, state of the world and delta); REST leaves it empty.
func TestControlPlaneIdentifier(t *testing.T) {
	rest := &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType: corev3.ApiConfigSource_REST, TransportApiVersion: corev3.ApiVersion_V3,
			ClusterNames: []string{"xds"}, RefreshDelay: durationpb.New(20 * time.Millisecond),
		}},
	}
	tests := []struct {
		name string
		ads  bool
		dr   *bootstrapv3.Bootstrap_DynamicResources
		want bool // whether the identifier is recorded
	}{
		{"ADS", true, adsResources(corev3.ApiConfigSource_GRPC), true},
		{"delta ADS", true, adsResources(corev3.ApiConfigSource_DELTA_GRPC), true},
		{"GRPC", false, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: grpcSource(corev3.ApiConfigSource_GRPC)}, true},
		{"DELTA_GRPC", false, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC)}, true},
		{"REST", false, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: rest}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := newControlPlane(t, tc.ads)
			cp.SetIdentifier("cp-1")
			cp.set("1", []types.Resource{staticCluster("web", "10.0.0.1:80")}, nil)
			p := startProxy(t, tc.dr, withDial(cp))
			p.waitFor("web", p.hasHosts("web", "10.0.0.1:80"))
			if !tc.want {
				if got := p.text("control_plane.identifier"); got != "" {
					t.Errorf("control_plane.identifier = %q; want it empty for %s", got, tc.name)
				}
				return
			}
			p.waitFor("control_plane.identifier cp-1", func() bool { return p.text("control_plane.identifier") == "cp-1" })
			// Another control plane answers the next version.
			cp.SetIdentifier("cp-2")
			cp.set("2", []types.Resource{staticCluster("web", "10.0.0.2:80")}, nil)
			p.waitFor("web moved", p.hasHosts("web", "10.0.0.2:80"))
			p.waitFor("control_plane.identifier cp-2", func() bool { return p.text("control_plane.identifier") == "cp-2" })
		})
	}
}

// kubeDir is a directory laid out as Kubernetes mounts a ConfigMap: each version of the files
// lives in its own hidden directory, ..data points at the current one, and every file is a
// symlink through ..data.
type kubeDir struct {
	t       *testing.T
	root    string
	version int
}

func newKubeDir(t *testing.T, files map[string]string) *kubeDir {
	k := &kubeDir{t: t, root: t.TempDir()}
	k.swap(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(k.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// swap writes files into a new version directory and moves a new ..data symlink over the old
// one (rename(2) of ..data_tmp, an IN_MOVED_TO in root), then removes the old version.
func (k *kubeDir) swap(files map[string]string) {
	k.t.Helper()
	k.version++
	dir := fmt.Sprintf("..v%d", k.version)
	if err := os.Mkdir(filepath.Join(k.root, dir), 0o755); err != nil {
		k.t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(k.root, dir, name), []byte(body), 0o644); err != nil {
			k.t.Fatal(err)
		}
	}
	tmp := filepath.Join(k.root, "..data_tmp")
	if err := os.Symlink(dir, tmp); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.root, "..data")); err != nil {
		k.t.Fatal(err)
	}
	if k.version > 1 {
		if err := os.RemoveAll(filepath.Join(k.root, fmt.Sprintf("..v%d", k.version-1))); err != nil {
			k.t.Fatal(err)
		}
	}
}

func cdsFile(version, cluster, addr string) string {
	return fmt.Sprintf(`version_info: %q
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %s
  connect_timeout: 1s
  load_assignment:
    cluster_name: %s
    endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %s, port_value: 80}}}}]}]
`, version, cluster, cluster, addr)
}

// TestFileWatchedDirectory: with path_config_source.watched_directory, a Kubernetes-style
// ..data symlink swap in the directory reloads the file.
func TestFileWatchedDirectory(t *testing.T) {
	k := newKubeDir(t, map[string]string{"cds.yaml": cdsFile("1", "web", "10.0.0.1")})
	src := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
		Path: filepath.Join(k.root, "cds.yaml"), WatchedDirectory: &corev3.WatchedDirectory{Path: k.root},
	}}}
	p := startProxy(t, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: src})
	p.waitFor("web from version 1", p.hasHosts("web", "10.0.0.1:80"))
	k.swap(map[string]string{"cds.yaml": cdsFile("2", "web", "10.0.0.2")})
	p.waitFor("web from version 2", p.hasHosts("web", "10.0.0.2:80"))
	k.swap(map[string]string{"cds.yaml": cdsFile("3", "web", "10.0.0.3")})
	p.waitFor("web from version 3", p.hasHosts("web", "10.0.0.3:80"))
	if got := p.text("cluster_manager.cds.version_text"); got != "3" {
		t.Errorf("cluster_manager.cds.version_text = %q; want %q", got, "3")
	}
}

// TestFileWatchCheck steps fileWatch through the events that do and do not reload a source.
func TestFileWatchCheck(t *testing.T) {
	write := func(t *testing.T, path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	moveInto := func(t *testing.T, dir, name, body string) {
		t.Helper()
		tmp := filepath.Join(t.TempDir(), name)
		write(t, tmp, body)
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	type step struct {
		what   string
		do     func(t *testing.T, dir string)
		reload bool
	}
	tests := []struct {
		name    string
		watched bool
		steps   []step
	}{
		{"file", false, []step{
			{"first check", func(*testing.T, string) {}, true},
			{"nothing changed", func(*testing.T, string) {}, false},
			{"file renamed into place", func(t *testing.T, dir string) { moveInto(t, dir, "x.yaml", "two") }, true},
			{"another file moved into the directory", func(t *testing.T, dir string) { moveInto(t, dir, "other", "o") }, false},
			{"file rewritten in place", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "x.yaml"), "three!") }, true},
		}},
		{"watched directory", true, []step{
			{"first check", func(*testing.T, string) {}, true},
			{"nothing changed", func(*testing.T, string) {}, false},
			{"another file moved into the directory", func(t *testing.T, dir string) { moveInto(t, dir, "other", "o") }, true},
			{"file renamed into place", func(t *testing.T, dir string) { moveInto(t, dir, "x.yaml", "two") }, true},
			{"file rewritten in place", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "x.yaml"), "three!") }, false},
			{"file removed", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "other")) }, false},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "x.yaml"), "one")
			w := &fileWatch{path: filepath.Join(dir, "x.yaml")}
			if tc.watched {
				w.dir = dir
			}
			for _, s := range tc.steps {
				s.do(t, dir)
				reload, err := w.check()
				if err != nil || reload != s.reload {
					t.Errorf("%s: check() = %v, %v; want %v, nil", s.what, reload, err, s.reload)
				}
			}
		})
	}
	t.Run("missing directory reported once", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "absent")
		w := &fileWatch{path: filepath.Join(dir, "x.yaml"), dir: dir}
		if reload, err := w.check(); !reload || err == nil {
			t.Errorf("first check() = %v, %v; want true and an error", reload, err)
		}
		if reload, err := w.check(); reload || err != nil {
			t.Errorf("second check() = %v, %v; want false, nil (reported once)", reload, err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "x.yaml"), "one")
		if reload, err := w.check(); !reload || err != nil {
			t.Errorf("check() after the directory appeared = %v, %v; want true, nil", reload, err)
		}
	})
}

// TestRTDSDeltaRemoval: a delta response removing the Runtime resource clears the layer and
// counts as a successful update (update_success, version_text), as in Envoy.
func TestRTDSDeltaRemoval(t *testing.T) {
	cp := newControlPlane(t, false)
	rt := &fakeRuntime{layers: map[string]map[string]any{}}
	p := startProxy(t, nil, withDial(cp), func(s *proxySetup) {
		s.runtime = rt
		s.rtds = []*bootstrapv3.RuntimeLayer_RtdsLayer{{Name: "rtds", RtdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC)}}
	})
	cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.RuntimeType: {runtimeLayer("rtds", map[string]any{"k": "1"})}})
	p.waitFor("layer k=1", func() bool { return fmt.Sprint(rt.get("rtds")["k"]) == "1" })
	cp.Set("2", map[resourcev3.Type][]types.Resource{resourcev3.RuntimeType: nil})
	p.waitFor("layer cleared", func() bool { return rt.get("rtds") == nil })
	if got := p.stat("runtime.update_success"); got != 2 {
		t.Errorf("runtime.update_success = %d; want 2 (the addition and the removal)", got)
	}
	if got := p.text("runtime.version_text"); got != "2" {
		t.Errorf("runtime.version_text = %q; want %q", got, "2")
	}
	if got := p.stat("runtime.update_rejected"); got != 0 {
		t.Errorf("runtime.update_rejected = %d; want 0", got)
	}
}
