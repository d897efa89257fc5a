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

// epoch anchors Mono: a reading of the system clock taken when the process started.
var epoch = time.Now()

// Mono reads the system's monotonic clock: nanoseconds since the process's epoch. time.Since of
// a reading that carries the monotonic clock reads only that clock, one vDSO call where
// time.Now, a date too, makes two (about 30 against 57 ns on the 2-core CI machine). Its
// readings are for durations and timers' stamps: they carry no date, and setting the wall clock
// does not move them.
func Mono() int64 { return int64(time.Since(epoch)) }

// MonoAt is Mono at t, a reading of the system clock (Monotonic) taken anyway.
func MonoAt(t time.Time) int64 { return int64(t.Sub(epoch)) }

// Stamps reads a clock for durations only: a stamp is nanoseconds on a scale of the clock's
// own, and the difference of two stamps is the time between them. For the system clock
// (Monotonic) a stamp is Mono, which reads the monotonic clock alone; for another clock (a
// test's) it is the UnixNano of a reading, so that a test clock drives durations as it drives
// dates. The zero value is not usable; call NewStamps. Safe for concurrent use.
type Stamps struct {
	now    func() time.Time
	system bool
}

// NewStamps returns the stamps of now's clock.
func NewStamps(now func() time.Time) Stamps { return Stamps{now: now, system: Monotonic(now)} }

// Now returns a stamp of now.
func (s Stamps) Now() int64 {
	if s.system {
		return Mono()
	}
	return s.now().UnixNano()
}

// At returns the stamp of t, a reading of the clock taken anyway.
func (s Stamps) At(t time.Time) int64 {
	if s.system {
		return MonoAt(t)
	}
	return t.UnixNano()
}

// Time returns the time of stamp n as a reading of the clock would: for the system clock, one
// that carries the monotonic reading n, so that deadlines and comparisons with other readings
// are on the monotonic clock, and a wall time derived from it (the epoch's plus n), not read:
// it is for deadlines, not for printing a date.
func (s Stamps) Time(n int64) time.Time {
	if s.system {
		return epoch.Add(time.Duration(n))
	}
	return time.Unix(0, n)
}

// System reports whether the clock is the system's, whose stamps are Mono's.
func (s Stamps) System() bool { return s.system }

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
