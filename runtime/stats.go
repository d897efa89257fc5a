package runtime

import "github.com/legateproxy/legate/stats"

// Stats are Envoy's runtime.* stats (reference §26.11). Register the struct
// under "runtime." before passing it to New; the zero value is usable.
type Stats struct {
	DeprecatedFeatureUse  stats.Counter `stat:"deprecated_feature_use"`
	LoadError             stats.Counter `stat:"load_error"`
	LoadSuccess           stats.Counter `stat:"load_success"`
	OverrideDirExists     stats.Counter `stat:"override_dir_exists"`
	OverrideDirNotExists  stats.Counter `stat:"override_dir_not_exists"`
	AdminOverridesActive  stats.Gauge   `stat:"admin_overrides_active,never_import"`
	DeprecatedFeatureSeen stats.Gauge   `stat:"deprecated_feature_seen_since_process_start,never_import"`
	NumKeys               stats.Gauge   `stat:"num_keys,never_import"`
	NumLayers             stats.Gauge   `stat:"num_layers,never_import"`
}
