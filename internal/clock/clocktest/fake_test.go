package clocktest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/internal/clock"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	var got []string
	record := func(name string) func() {
		return func() { got = append(got, name+"@"+f.Now().Sub(epoch).String()) }
	}
	f.AfterFunc(3*time.Second, record("c"))
	f.AfterFunc(time.Second, record("a"))
	f.AfterFunc(time.Second, record("b"))
	f.AfterFunc(0, func() {
		got = append(got, "zero")
		f.AfterFunc(2*time.Second, record("nested"))
	})
	stopped := f.AfterFunc(2*time.Second, record("stopped"))
	if !stopped.Stop() {
		t.Errorf("Stop() = false on a pending timer; want true")
	}
	if stopped.Stop() {
		t.Errorf("second Stop() = true; want false")
	}
	f.Advance(0)
	f.Advance(2 * time.Second)
	want := []string{"zero", "a@1s", "b@1s", "nested@2s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fired (-want +got):\n%s", diff)
	}
	if n := f.Pending(); n != 1 {
		t.Errorf("Pending() = %d; want 1", n)
	}
	if d, ok := f.Next(); !ok || d != time.Second {
		t.Errorf("Next() = %v, %v; want 1s, true", d, ok)
	}
	f.Advance(time.Hour)
	if got[len(got)-1] != "c@3s" {
		t.Errorf("last fired = %q; want c@3s", got[len(got)-1])
	}
	if now := f.Now().Sub(epoch); now != time.Hour+2*time.Second {
		t.Errorf("Now() = epoch+%v; want epoch+1h0m2s", now)
	}
	if _, ok := f.Next(); ok {
		t.Errorf("Next() reports a timer after all fired")
	}
}

func TestFakeTicker(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(time.Second)
	f.Advance(999 * time.Millisecond)
	select {
	case got := <-tk.C():
		t.Fatalf("tick at %v before the first period ended", got.Sub(epoch))
	default:
	}
	f.Advance(time.Millisecond)
	if got := (<-tk.C()).Sub(epoch); got != time.Second {
		t.Errorf("first tick at epoch+%v; want epoch+1s", got)
	}
	// Three periods with nobody reading: the channel keeps the first and drops the rest.
	f.Advance(3 * time.Second)
	if got := (<-tk.C()).Sub(epoch); got != 2*time.Second {
		t.Errorf("kept tick at epoch+%v; want epoch+2s", got)
	}
	select {
	case got := <-tk.C():
		t.Errorf("second buffered tick at epoch+%v; want dropped", got.Sub(epoch))
	default:
	}
	tk.Stop()
	if n := f.Pending(); n != 0 {
		t.Errorf("Pending() = %d after Stop; want 0", n)
	}
	f.Advance(time.Hour)
	select {
	case got := <-tk.C():
		t.Errorf("tick at epoch+%v after Stop", got.Sub(epoch))
	default:
	}
}

func TestTicksDeliversSentTicks(t *testing.T) {
	c := NewTicks(epoch)
	tk := c.NewTicker(time.Minute)
	got := make(chan time.Time)
	go func() { got <- <-tk.C() }()
	c.Ch <- epoch.Add(time.Second)
	select {
	case v := <-got:
		if v.Sub(epoch) != time.Second {
			t.Errorf("tick = epoch+%v; want epoch+1s", v.Sub(epoch))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sent tick not received within 5s")
	}
	tk.Stop()
}

// TestFakeIsNotMonotonic checks that a Fake started from a reading of the system clock drops
// its monotonic reading: code that takes stamps on the system clock from a clock's readings
// when clock.Monotonic says so must not take them from a Fake's.
func TestFakeIsNotMonotonic(t *testing.T) {
	f := NewFake(time.Now())
	if clock.Monotonic(f.Now) {
		t.Errorf("clock.Monotonic(NewFake(time.Now()).Now) = true; want false")
	}
}
