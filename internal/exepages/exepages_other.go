//go:build !linux

package exepages

import "errors"

// Release does nothing outside Linux, where /proc/self/maps and MADV_DONTNEED's semantics for
// file mappings are what this package relies on.
func Release() (int, error) { return 0, errors.ErrUnsupported }

// Trim does nothing outside Linux (see Release).
func Trim(budget int) (bool, error) { return false, errors.ErrUnsupported }
