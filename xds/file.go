package xds

import (
	"context"
	"os"
	"time"

	"github.com/legateproxy/legate/xds/resource"
)

// DefaultFilePollInterval is how often a path config source's file (or watched directory) is
// checked.
const DefaultFilePollInterval = time.Second

// runFile delivers the DiscoveryResponse in the source's file, and again whenever the file is
// replaced, or, with path_config_source.watched_directory, whenever a file is moved into that
// directory. Envoy learns both from inotify (IN_MOVED_TO on the file, or on the directory);
// Legate polls every Config.FilePollInterval instead (see fileWatch), which sees the same
// renames. A file that is missing or does not parse counts update_failure; its resources are
// kept.
func (m *mux) runFile(ctx context.Context) {
	w := &fileWatch{path: m.src.Path, dir: m.src.WatchedDirectory}
	for {
		if !m.watching() {
			// The mux starts before its first watch is added: a file read now would be a
			// response for an unsubscribed type, dropped, and not read again until it changes.
			// addWatch signals wake.
			select {
			case <-ctx.Done():
				return
			case <-m.wake:
			}
			continue
		}
		reload, err := w.check()
		if err != nil {
			m.c.log.Warnf("xds: %s: %v", m.key, err)
			m.fileFailed(err)
		}
		if reload {
			m.fileLoad()
		}
		if !m.c.sleep(ctx, m.c.filePoll) {
			return
		}
	}
}

// fileWatch decides when a path source is read again. Without a watched directory it tracks
// the file's identity (device and inode, after symlinks), size and modification time, which an
// atomic rename into place changes. With one it tracks the identity of every entry of the
// directory, symlinks not followed: a file or symlink moved into the directory (Kubernetes
// swapping its ..data symlink) puts a new inode under a name, which triggers a reload, as
// Envoy's IN_MOVED_TO watch on the directory does; writes in place and removals do not.
// The first check always reloads. Used by one goroutine.
type fileWatch struct {
	path, dir string
	started   bool
	// last is the file's identity (file mode); entries the directory's (directory mode).
	last    os.FileInfo
	entries map[string]os.FileInfo
	// failing is set while the file or directory cannot be read, so the failure is
	// reported once rather than on every poll.
	failing bool
}

// check reports whether the source must be read again, and an error the first time the file
// or directory cannot be examined (nil again until it recovers).
func (w *fileWatch) check() (reload bool, err error) {
	if w.dir != "" {
		return w.checkDir()
	}
	fi, err := os.Stat(w.path)
	if err != nil {
		return false, w.fail(err)
	}
	w.failing = false
	last := w.last
	w.last = fi
	return last == nil || !os.SameFile(last, fi) || !fi.ModTime().Equal(last.ModTime()) || fi.Size() != last.Size(), nil
}

func (w *fileWatch) checkDir() (bool, error) {
	first := !w.started
	w.started = true
	des, err := os.ReadDir(w.dir)
	if err != nil {
		// The file may still be readable; the first check tries it.
		return first, w.fail(err)
	}
	w.failing = false
	entries := make(map[string]os.FileInfo, len(des))
	moved := false
	for _, de := range des {
		fi, err := de.Info() // the entry itself; a symlink is not followed
		if err != nil {
			continue // removed since ReadDir
		}
		entries[de.Name()] = fi
		if prev, ok := w.entries[de.Name()]; !ok || !os.SameFile(prev, fi) {
			moved = true
		}
	}
	w.entries = entries
	return first || moved, nil
}

// fail returns err the first time in a row the source cannot be examined, nil after.
func (w *fileWatch) fail(err error) error {
	if w.failing {
		return nil
	}
	w.failing = true
	return err
}

// watching reports whether the mux has a watch for its type.
func (m *mux) watching() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.watches[m.typeURL] != nil
}

func (m *mux) fileLoad() {
	data, err := os.ReadFile(m.src.Path)
	if err != nil {
		m.fileFailed(err)
		return
	}
	resp, err := resource.ParseResponseFile(m.src.Path, data)
	if err != nil {
		m.c.log.Warnf("xds: %s: %v", m.key, err)
		m.fileFailed(err)
		return
	}
	resp.TypeUrl = m.typeURL
	m.handleSotW(resp)
}

func (m *mux) fileFailed(err error) {
	m.failAll()
	m.c.notify(m.typeURL, "", err)
}
