package clock

import "time"

// Clock tells the time and schedules callbacks and ticks. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc arranges for f to be called once, d from now. A d <= 0 makes f due at once.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTicker returns a Ticker that delivers the time every d (d > 0). Like time.Ticker, it
	// drops ticks for a slow reader.
	NewTicker(d time.Duration) Ticker
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call; it reports whether the call was still pending.
	Stop() bool
}

// Ticker is a periodic tick source.
type Ticker interface {
	// C returns the channel the ticks arrive on.
	C() <-chan time.Time
	// Stop ends the ticks; it does not close the channel.
	Stop()
}

// Real returns the system clock: time.Now, time.AfterFunc and time.NewTicker.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Monotonic reports whether now's readings carry the system's monotonic clock, as the system
// clock's do and a test clock's (clocktest.Fake, a fixed time) do not: code that keeps stamps
// on the system clock may then take them from a reading of now it has anyway (t.Sub of another
// such reading is on the monotonic clock) instead of reading the clock again.
func Monotonic(now func() time.Time) bool {
	t := now()
	return t != t.Round(0) // Round(0) strips only the monotonic reading
}

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// realTicker adapts time.Ticker to Ticker.
type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// After returns a channel that is closed d from now on c, and the timer that closes it; stopping
// the timer leaves the channel open. It is time.After for code that selects on a deadline.
func After(c Clock, d time.Duration) (<-chan struct{}, Timer) {
	done := make(chan struct{})
	return done, c.AfterFunc(d, func() { close(done) })
}
