package clocktest

import (
	"container/heap"
	"sync"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// Fake is a manual clock.Clock. Time moves only when Advance is called; timers whose deadline is
// reached fire inside Advance, and tickers deliver their due ticks there. The zero value is not
// usable; call NewFake.
type Fake struct {
	// mu guards now, seq and timers.
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap
}

// NewFake returns a Fake clock reading start, without its monotonic reading if it has one:
// a fake reading is never the system clock's (clock.Monotonic).
func NewFake(start time.Time) *Fake { return &Fake{now: start.Round(0)} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc schedules fn at Now()+d. It never calls fn itself, even for d <= 0: the next Advance
// (Advance(0) included) does.
func (f *Fake) AfterFunc(d time.Duration, fn func()) clock.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scheduleLocked(d, fn)
}

func (f *Fake) scheduleLocked(d time.Duration, fn func()) *fakeTimer {
	f.seq++
	t := &fakeTimer{clock: f, when: f.now.Add(max(d, 0)), seq: f.seq, fn: fn, index: -1}
	heap.Push(&f.timers, t)
	return t
}

// NewTicker returns a ticker that Advance ticks every d (d > 0). Its channel holds one tick; a
// tick due while one is unread is dropped, as with time.Ticker.
func (f *Fake) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("clocktest: NewTicker with a non-positive interval")
	}
	t := &fakeTicker{clock: f, period: d, ch: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.next = f.scheduleLocked(d, t.tick)
	return t
}

// Advance moves the clock forward by d, firing every timer due at or before the new time in
// deadline order (ties in creation order). Each callback sees Now() equal to its own deadline, and
// timers that callbacks create are fired too when they fall due within the window.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(max(d, 0))
	for {
		if len(f.timers) == 0 || f.timers[0].when.After(end) {
			break
		}
		t := heap.Pop(&f.timers).(*fakeTimer)
		if t.when.After(f.now) {
			f.now = t.when
		}
		f.mu.Unlock()
		t.fn()
		f.mu.Lock()
	}
	f.now = end
	f.mu.Unlock()
}

// Pending returns the number of scheduled timers (a running ticker counts as one) that have not
// fired or been stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Next returns the delay until the earliest pending timer or tick, and false when none is pending.
func (f *Fake) Next() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return 0, false
	}
	return f.timers[0].when.Sub(f.now), true
}

type fakeTimer struct {
	clock *Fake
	when  time.Time
	seq   uint64
	fn    func()
	index int // position in the heap; -1 once fired or stopped
}

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	return t.stopLocked()
}

func (t *fakeTimer) stopLocked() bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.clock.timers, t.index)
	return true
}

// fakeTicker is a timer that schedules its successor each time it fires.
type fakeTicker struct {
	clock  *Fake
	period time.Duration
	ch     chan time.Time
	// next (guarded by clock.mu) is the pending tick; nil once stopped.
	next *fakeTimer
}

func (t *fakeTicker) C() <-chan time.Time { return t.ch }

func (t *fakeTicker) Stop() {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.next != nil {
		t.next.stopLocked()
		t.next = nil
	}
}

// tick runs inside Advance with the clock reading the tick's deadline.
func (t *fakeTicker) tick() {
	f := t.clock
	f.mu.Lock()
	if t.next == nil { // stopped by a callback that ran earlier in this Advance
		f.mu.Unlock()
		return
	}
	now := f.now
	t.next = f.scheduleLocked(t.period, t.tick)
	f.mu.Unlock()
	select {
	case t.ch <- now:
	default:
	}
}

type timerHeap []*fakeTimer

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *timerHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}

// Ticks is a fake clock whose tickers all deliver on Ch, which the test sends on: a send returns
// once the code under test has taken the tick. Now and AfterFunc are the embedded Fake's.
type Ticks struct {
	*Fake
	Ch chan time.Time
}

// NewTicks returns a Ticks reading start with an unbuffered Ch.
func NewTicks(start time.Time) *Ticks { return &Ticks{Fake: NewFake(start), Ch: make(chan time.Time)} }

// NewTicker returns a ticker on c.Ch, whatever d is.
func (c *Ticks) NewTicker(time.Duration) clock.Ticker { return sentTicker(c.Ch) }

// sentTicker is a ticker whose ticks a test sends; Stop does nothing, as no tick is scheduled.
type sentTicker chan time.Time

func (t sentTicker) C() <-chan time.Time { return t }
func (t sentTicker) Stop()               {}
