package sockopt

import "syscall"

func set(fd uintptr, o Option) error {
	if o.IsBuf {
		return syscall.SetsockoptString(int(fd), o.Level, o.Name, string(o.Buf))
	}
	return syscall.SetsockoptInt(int(fd), o.Level, o.Name, o.Int)
}

// Keepalive returns the options that turn TCP keep-alive on: SO_KEEPALIVE, then TCP_KEEPCNT,
// TCP_KEEPIDLE (seconds) and TCP_KEEPINTVL (seconds) for those that are not zero, all set
// before bind. path names them in errors.
func Keepalive(path string, probes, idle, interval uint32) []Option {
	out := []Option{{Path: path, Description: "SO_KEEPALIVE", Level: syscall.SOL_SOCKET, Name: syscall.SO_KEEPALIVE, Int: 1}}
	for _, o := range []struct {
		v    uint32
		name int
		desc string
	}{{probes, syscall.TCP_KEEPCNT, "keepalive_probes"}, {idle, syscall.TCP_KEEPIDLE, "keepalive_time"}, {interval, syscall.TCP_KEEPINTVL, "keepalive_interval"}} {
		if o.v != 0 {
			out = append(out, Option{Path: path + "." + o.desc, Level: syscall.IPPROTO_TCP, Name: o.name, Int: int(min(o.v, 1<<31-1))})
		}
	}
	return out
}

// Check sets the options meant before connecting (Prebind, Bound) on a throwaway TCP socket
// of each family they are for, so that a configuration the kernel refuses fails when it is
// loaded rather than at each upstream connection. IPv6 is skipped where the system has none.
func Check(opts []Option) error {
	for _, f := range []struct {
		family, domain int
	}{{4, syscall.AF_INET}, {6, syscall.AF_INET6}} {
		fd, err := syscall.Socket(f.domain, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			if f.family == 6 {
				continue
			}
			return err
		}
		err = applyFD(uintptr(fd), opts, Prebind, f.family)
		if err == nil {
			err = applyFD(uintptr(fd), opts, Bound, f.family)
		}
		syscall.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// Int reads an int option of c's socket: what tests and diagnostics check the options with.
func Int(c syscall.Conn, level, name int) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), level, name) }); err != nil {
		return 0, err
	}
	return v, gerr
}
