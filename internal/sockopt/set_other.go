//go:build !linux

package sockopt

func set(uintptr, Option) error { return errUnsupported }

// Keepalive returns one option that fails to be set: keep-alive through socket options is
// Linux's.
func Keepalive(path string, _, _, _ uint32) []Option {
	return []Option{{Path: path, Description: "SO_KEEPALIVE"}}
}

// Check refuses every option: their numbers are Linux's.
func Check(opts []Option) error {
	if len(opts) > 0 {
		return errUnsupported
	}
	return nil
}
