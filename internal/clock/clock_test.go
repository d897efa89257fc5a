package clock

import (
	"testing"
	"time"
)

func TestRealClockFires(t *testing.T) {
	c := Real()
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("real AfterFunc did not fire within 5s")
	}
	if c.Now().IsZero() {
		t.Errorf("Now() is zero")
	}
}

func TestRealTickerTicks(t *testing.T) {
	tk := Real().NewTicker(time.Millisecond)
	defer tk.Stop()
	select {
	case <-tk.C():
	case <-time.After(5 * time.Second):
		t.Fatal("real ticker did not tick within 5s")
	}
}

func TestAfterClosesAtDeadline(t *testing.T) {
	done, _ := After(Real(), time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("After's channel not closed within 5s")
	}
	stopped, timer := After(Real(), time.Hour)
	if !timer.Stop() {
		t.Errorf("Stop() = false on a pending After; want true")
	}
	select {
	case <-stopped:
		t.Errorf("channel closed after Stop")
	default:
	}
}

// TestMonotonic checks which clocks Monotonic reports as the system's: the system clock's
// readings carry the monotonic clock; wall-time and fixed readings do not (clocktest's tests
// check a Fake's).
func TestMonotonic(t *testing.T) {
	for _, tc := range []struct {
		name string
		now  func() time.Time
		want bool
	}{
		{"Real", Real().Now, true},
		{"time.Now", time.Now, true},
		{"wall time only", func() time.Time { return time.Now().Round(0) }, false},
		{"fixed", func() time.Time { return time.Unix(1, 0) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Monotonic(tc.now); got != tc.want {
				t.Errorf("Monotonic() = %v; want %v", got, tc.want)
			}
		})
	}
}
