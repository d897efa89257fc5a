//go:build !linux

package sockopt

// set fails: binding to a foreign address needs Linux's IP_TRANSPARENT.
func (s *Source) set(uintptr) error { return errUnsupported }
