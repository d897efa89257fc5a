//go:build race

package statsd

// raceEnabled: the race detector makes sync.Pool drop buffers, so pooled paths allocate.
const raceEnabled = true
