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

// TestStamps checks a clock's stamps: the system clock's are Mono's (At of a reading agrees
// with Mono read around it, and Time gives a reading back that compares on the monotonic
// clock), a wall-time clock's are its readings' UnixNano, and the difference of two stamps is
// the time between the readings either way.
func TestStamps(t *testing.T) {
	t.Run("system", func(t *testing.T) {
		s := NewStamps(Real().Now)
		if !s.System() {
			t.Fatal("System() = false for the system clock")
		}
		before := Mono()
		at := s.At(time.Now())
		now := s.Now()
		after := Mono()
		if at < before || now < at || after < now {
			t.Errorf("Mono %d, At %d, Now %d, Mono %d; want in order", before, at, now, after)
		}
		back := s.Time(at)
		if back == back.Round(0) {
			t.Errorf("Time(%d) carries no monotonic reading", at)
		}
		if got := MonoAt(back); got != at {
			t.Errorf("MonoAt(Time(%d)) = %d", at, got)
		}
		if d := time.Until(s.Time(now + int64(time.Hour))); d <= 59*time.Minute || d > time.Hour {
			t.Errorf("a stamp an hour ahead is %v away; want about an hour", d)
		}
	})
	t.Run("wall", func(t *testing.T) {
		start := time.Unix(1000, 5)
		cur := start
		s := NewStamps(func() time.Time { return cur })
		if s.System() {
			t.Fatal("System() = true for a wall-time clock")
		}
		a := s.Now()
		cur = cur.Add(300 * time.Millisecond)
		b := s.Now()
		if a != start.UnixNano() || time.Duration(b-a) != 300*time.Millisecond {
			t.Errorf("stamps %d, %d; want %d and 300ms later", a, b, start.UnixNano())
		}
		if got := s.At(cur); got != b {
			t.Errorf("At = %d; want %d", got, b)
		}
		if got := s.Time(b); !got.Equal(cur) {
			t.Errorf("Time(%d) = %v; want %v", b, got, cur)
		}
	})
}

// BenchmarkReadings compares a reading of the system clock that is a date too (time.Now, two
// vDSO calls) with a stamp (Mono, the monotonic clock alone).
func BenchmarkReadings(b *testing.B) {
	b.Run("Now", func(b *testing.B) {
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		_ = t
	})
	b.Run("Mono", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = Mono()
		}
		_ = n
	})
}
