package outlier

import (
	"context"

	"github.com/legateproxy/legate/internal/clock"
)

// Run is the detector's control goroutine: it arms the interval timer (outlier_detection.interval_ms,
// else interval, re-read after every sweep), runs each sweep, and ejects hosts whose
// consecutive-failure counters Report saw reach their thresholds. It returns nil when ctx ends,
// with the timer stopped. Run must be called at most once at a time.
func (d *Detector) Run(ctx context.Context) error {
	var timer clock.Timer
	arm := func() {
		timer = d.clock.AfterFunc(d.interval(d.snapshot()), d.onTimer)
		if d.afterArm != nil {
			d.afterArm()
		}
	}
	arm()
	defer func() { timer.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-d.queue:
			d.handlePending(m)
		case <-d.kick:
			d.drainPending()
		case <-d.tick:
			// Ejections reported before the timer fired are handled first, as Envoy's dispatcher
			// runs posted callbacks in order.
			d.drainPending()
			d.sweep()
			arm()
		}
	}
}

// onTimer runs on the clock's goroutine and only wakes Run.
func (d *Detector) onTimer() {
	select {
	case d.tick <- struct{}{}:
	default:
	}
}
