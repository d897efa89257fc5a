//go:build !linux

package pagewise

import "errors"

// Enable does nothing outside Linux, where userfaultfd and fault-around are.
func Enable() error { return errors.ErrUnsupported }

// ReadOnly is not available outside Linux (/proc/self/maps).
func ReadOnly() ([][2]uint64, error) { return nil, errors.ErrUnsupported }
