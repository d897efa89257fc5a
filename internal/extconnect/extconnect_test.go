package extconnect

import "testing"

// TestEnabled checks that the package's init turned extended CONNECT on for this test
// binary (whose environment does not set http2xconnect).
func TestEnabled(t *testing.T) {
	if !Enabled() {
		t.Fatal("Enabled() = false; want true after init")
	}
}

func TestEnabledReadsTheSetting(t *testing.T) {
	tests := []struct {
		name, env string
		want      bool
	}{
		{"alone", "http2xconnect=1", true},
		{"among others", "madvdontneed=1, http2xconnect=1", true},
		{"turned off", "http2xconnect=0", false},
		{"absent", "madvdontneed=1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(godebug, tt.env)
			if got := Enabled(); got != tt.want {
				t.Errorf("Enabled() with GODEBUG=%q = %v; want %v", tt.env, got, tt.want)
			}
		})
	}
}
