//go:build !linux

package sockopt

// set fails: binding to a foreign address needs Linux's IP_TRANSPARENT.
func (s *Source) set(uintptr) error { return errUnsupported }

// CheckSource fails: binding to a foreign address needs Linux's IP_TRANSPARENT.
func CheckSource(uint32) error { return errUnsupported }
