package server

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestInitManager(t *testing.T) {
	t.Run("no targets is done at start", func(t *testing.T) {
		m := NewInit("server")
		select {
		case <-m.Done():
			t.Fatal("Done closed before Start")
		default:
		}
		m.Start()
		waitClosed(t, m.Done())
	})
	t.Run("waits for every target", func(t *testing.T) {
		m := NewInit("server")
		a, err := m.Add("cluster a")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Add("cluster b")
		m.Start()
		a.Ready()
		a.Ready()
		if diff := cmp.Diff([]string{"cluster b"}, m.Unready()); diff != "" {
			t.Errorf("Unready() (-want +got):\n%s", diff)
		}
		select {
		case <-m.Done():
			t.Fatal("Done closed with a pending target")
		default:
		}
		b.Ready()
		waitClosed(t, m.Done())
		if got := m.Unready(); len(got) != 0 {
			t.Errorf("Unready() = %v, want none", got)
		}
	})
	t.Run("ready before start", func(t *testing.T) {
		m := NewInit("server")
		a, _ := m.Add("a")
		a.Ready()
		m.Start()
		waitClosed(t, m.Done())
	})
	t.Run("misuse is an error", func(t *testing.T) {
		m := NewInit("server")
		if _, err := m.Add("a"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Add("a"); err == nil {
			t.Error("Add of a duplicate name succeeded")
		}
		m.Start()
		if _, err := m.Add("b"); err == nil {
			t.Error("Add after Start succeeded")
		}
	})
}

func waitClosed(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed within 5s")
	}
}
