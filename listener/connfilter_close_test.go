package listener_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/listener/filters/chaintest"
)

// closingFilter admits every connection and counts its Close calls.
type closingFilter struct{ closed *atomic.Int32 }

func (closingFilter) OnConnection(*listener.Conn) bool { return true }
func (f closingFilter) Close() error                   { f.closed.Add(1); return nil }

// TestConnFiltersClosed: a network filter holding resources (io.Closer) is closed once with
// its chain when the listener manager shuts down, and at once when a later filter of its
// chain fails to build.
func TestConnFiltersClosed(t *testing.T) {
	var closed atomic.Int32
	register := func(b *registry.Builder) {
		registry.Add(b, listener.ConnFilters, "test.closing", &emptypb.Empty{}, func(*listener.ChainContext, any) (listener.ConnFilter, error) {
			return closingFilter{&closed}, nil
		})
		registry.Add(b, listener.ConnFilters, "test.failing", &structpb.Struct{}, func(*listener.ChainContext, any) (listener.ConnFilter, error) {
			return nil, errors.New("refused")
		})
	}
	t.Run("shutdown", func(t *testing.T) {
		addr, _, err := chaintest.Serve(t, register, nil, `{name: test.closing},`)
		if err != nil {
			t.Fatal(err)
		}
		if !chaintest.Admitted(t, addr) {
			t.Fatal("the chain refused a connection")
		}
		if n := closed.Load(); n != 0 {
			t.Fatalf("closed %d times while serving", n)
		}
	})
	if n := closed.Load(); n != 1 {
		t.Errorf("closed %d times after shutdown; want 1", n)
	}
	closed.Store(0)
	if _, _, err := chaintest.Serve(t, register, nil, `{name: test.closing}, {name: test.failing},`); err == nil {
		t.Fatal("a chain with a failing filter was built")
	}
	if n := closed.Load(); n != 1 {
		t.Errorf("closed %d times after the chain failed to build; want 1", n)
	}
}
