package hotrestart

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// SocketName is the name of the hot-restart socket of one epoch:
// "<path>_legate_<baseID>_<epoch>". path is --socket-path ("@…" is the
// Linux abstract namespace). Base id and epoch are separate fields, so two
// Legates with different --base-id never share a name whatever their epochs
// (Envoy added base id and epoch, so base id 0 epoch 1 and base id 1 epoch 0
// met: envoy#11310). "legate" keeps the names apart from Envoy's own
// "<path>_parent_<n>" and "<path>_child_<n>".
func SocketName(path string, baseID, epoch uint32) string {
	return fmt.Sprintf("%s_legate_%d_%d", path, baseID, epoch)
}

// ErrInUse is returned by Listen when another live process holds the
// socket name: another Legate runs with the same --base-id and epoch.
var ErrInUse = errors.New("hot restart socket in use")

// listenSocket binds name. A socket file (not abstract) gets mode; a stale
// file left by a process that died is replaced, a live one is ErrInUse.
func listenSocket(name string, mode os.FileMode) (*net.UnixListener, error) {
	addr := &net.UnixAddr{Name: name, Net: "unix"}
	abstract := strings.HasPrefix(name, "@")
	if !abstract {
		if _, err := os.Lstat(name); err == nil {
			c, err := net.DialTimeout("unix", name, time.Second)
			if err == nil {
				c.Close()
				return nil, fmt.Errorf("%w: %s answers", ErrInUse, name)
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				return nil, fmt.Errorf("hot restart socket %s: %w", name, err)
			}
			os.Remove(name) // stale: its process is gone
		}
	}
	ln, err := net.ListenUnix("unix", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, name)
		}
		return nil, fmt.Errorf("hot restart socket %s: %w", name, err)
	}
	if !abstract && mode != 0 {
		if err := os.Chmod(name, mode); err != nil {
			ln.Close()
			return nil, fmt.Errorf("hot restart socket %s: --socket-mode: %w", name, err)
		}
	}
	return ln, nil
}
