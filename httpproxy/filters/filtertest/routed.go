package filtertest

import (
	"time"

	"github.com/legateproxy/legate/httpproxy/route"
)

// Routed is a filter.Downstream whose route is Match (nil: none): Pause returns at once and
// BufferBody returns Err. Unit tests of a filter's OnRequest use it without a proxy.
type Routed struct {
	Match *route.Match
	Err   error
}

// Pause implements filter.Downstream without waiting.
func (r Routed) Pause(<-chan struct{}, time.Duration) bool { return false }

// Route implements filter.Downstream.
func (r Routed) Route() *route.Match { return r.Match }

// BufferBody implements filter.Downstream.
func (r Routed) BufferBody(int64) error { return r.Err }
