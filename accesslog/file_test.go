package accesslog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/legateproxy/legate/internal/clock/clocktest"
)

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFile(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	clk := clocktest.NewTicks(time.Unix(0, 0))
	ticks := clk.Ch
	f, err := OpenFile(path, FileOptions{Clock: clk, MinFlushSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("buffered until a tick", func(t *testing.T) {
		if _, err := f.Write([]byte("one\n")); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, path); got != "" {
			t.Fatalf("file before flush = %q; want empty", got)
		}
		ticks <- time.Now() // received by the flush loop
		ticks <- time.Now() // the first tick's flush has finished once this one is received
		if got := readAll(t, path); got != "one\n" {
			t.Errorf("file after tick = %q; want %q", got, "one\n")
		}
	})

	t.Run("reopen after rename", func(t *testing.T) {
		if _, err := f.Write([]byte("two\n")); err != nil {
			t.Fatal(err)
		}
		rotated := path + ".1"
		if err := os.Rename(path, rotated); err != nil {
			t.Fatal(err)
		}
		if err := f.Reopen(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("three\n")); err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, rotated); got != "one\ntwo\n" {
			t.Errorf("rotated file = %q; want %q", got, "one\ntwo\n")
		}
		if got := readAll(t, path); got != "three\n" {
			t.Errorf("new file = %q; want %q", got, "three\n")
		}
	})

	t.Run("concurrent writers keep lines whole", func(t *testing.T) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					fmt.Fprintf(f, "writer-%d line-%03d %s\n", w, i, strings.Repeat("x", 40))
				}
			}()
		}
		wg.Wait()
		if err := f.Flush(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(readAll(t, path), "\n"), "\n")
		if got, want := len(lines), 1+8*200; got != want {
			t.Fatalf("lines = %d; want %d", got, want)
		}
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "writer-") || len(l) != len("writer-0 line-000 ")+40 {
				t.Fatalf("torn line %q", l)
			}
		}
	})

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("late\n")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close error = %v; want ErrClosed", err)
	}
}

func TestFileFlushesWhenFull(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "a.log")
	f, err := OpenFile(path, FileOptions{MinFlushSize: 8, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("0123456789\n")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, path); got != "0123456789\n" {
		t.Errorf("file = %q; want the line written at once", got)
	}
}

func TestOpenFileError(t *testing.T) {
	_, err := OpenFile(filepath.Join(t.TempDir(), "no", "such", "dir.log"), FileOptions{})
	if err == nil || !strings.Contains(err.Error(), "access log path") {
		t.Errorf("OpenFile error = %v; want an access log path error", err)
	}
}

func TestManager(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	m := NewManager(FileOptions{FlushInterval: time.Hour})
	a1, err := m.Open(filepath.Join(dir, "a.log"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := m.Open(filepath.Join(dir, "a.log"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Open(filepath.Join(dir, "b.log"))
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 || a1 == b {
		t.Fatalf("Open shares files by path: got a1 == a2 %v, a1 == b %v; want true, false", a1 == a2, a1 == b)
	}
	if _, err := a1.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "a.log"), filepath.Join(dir, "a.log.1")); err != nil {
		t.Fatal(err)
	}
	if err := m.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, filepath.Join(dir, "a.log.1")); got != "before\n" {
		t.Errorf("rotated = %q; want %q", got, "before\n")
	}
	if got := readAll(t, filepath.Join(dir, "a.log")); got != "after\n" {
		t.Errorf("reopened = %q; want %q", got, "after\n")
	}
	if _, err := m.Open(filepath.Join(dir, "c.log")); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close error = %v; want ErrClosed", err)
	}
}
