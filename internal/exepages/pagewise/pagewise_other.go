//go:build !linux

package pagewise

import "errors"

// Enable does nothing outside Linux, where userfaultfd and fault-around are.
func Enable() error { return errors.ErrUnsupported }
