package listener

import (
	"io"
	"testing"
)

// TestConnectionIDs checks that every accepted connection gets its own non-zero id, counted
// across the manager's listeners (Envoy's %CONNECTION_ID%).
func TestConnectionIDs(t *testing.T) {
	g := newGreeter()
	m := testManager(t, ManagerConfig{Services: g.services(), Workers: 2},
		listenerFromYAML(t, plainListener("a", "")),
		listenerFromYAML(t, plainListener("b", ", stat_prefix: public")))
	seen := map[uint64]string{}
	for i, name := range []string{"a", "b", "a", "b"} {
		_, c, _ := greet(t, addrOf(t, m, name), nil)
		io.WriteString(c, "ping\n")
		c.Close()
		served := <-g.served
		id := served.ID()
		if id == 0 {
			t.Fatalf("connection %d to %s: ID() = 0; want non-zero", i, name)
		}
		if prev, dup := seen[id]; dup {
			t.Fatalf("connection %d to %s: ID() = %d; already given to a connection to %s", i, name, id, prev)
		}
		seen[id] = name
	}
	if got, want := len(seen), 4; got != want {
		t.Errorf("distinct ids = %d; want %d", got, want)
	}
}
