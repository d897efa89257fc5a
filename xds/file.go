package xds

import (
	"context"
	"os"
	"time"

	"github.com/legateproxy/legate/xds/resource"
)

// DefaultFilePollInterval is how often a path config source's file is checked.
const DefaultFilePollInterval = time.Second

// runFile delivers the DiscoveryResponse in the source's file, and again whenever the file is
// replaced. Envoy reloads on a move into place (inotify IN_MOVED_TO); Legate polls the file's
// identity (device and inode), size and modification time, which an atomic rename changes.
// A file that is missing or does not parse counts update_failure; its resources are kept.
func (m *mux) runFile(ctx context.Context) {
	var last os.FileInfo
	failedOnce := false
	for {
		fi, err := os.Stat(m.src.Path)
		switch {
		case err != nil:
			if !failedOnce {
				m.c.log.Warnf("xds: %s: %v", m.key, err)
				m.fileFailed(err)
				failedOnce = true
			}
		case last == nil || !os.SameFile(last, fi) || !fi.ModTime().Equal(last.ModTime()) || fi.Size() != last.Size():
			last = fi
			failedOnce = false
			m.fileLoad()
		}
		if !m.c.sleep(ctx, m.c.filePoll) {
			return
		}
	}
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
