package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestMain exits before any test when TestInitDropsRunBetweenTheGroups runs this binary again
// for its init trace: the inits are all it wants.
func TestMain(m *testing.M) {
	if os.Getenv("LEGATE_INIT_ORDER_ONLY") != "" {
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestInitDropsRunBetweenTheGroups holds where the blank-imported exepages packages run their
// init, which is what splits the package inits' resident peak (package afterwkt says why): the
// order comes from the runtime's init trace of this test binary, which links every package the
// command links.
func TestInitDropsRunBetweenTheGroups(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEGATE_INIT_ORDER_ONLY=1", "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var order []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			order = append(order, f[1])
		}
	}
	at := func(pkg string) int {
		i := slices.Index(order, pkg)
		if i < 0 {
			t.Fatalf("%s is not in the init trace (%d inits)", pkg, len(order))
		}
		return i
	}
	const ep = "github.com/legateproxy/legate/internal/exepages/"
	wkt, before, after := at(ep+"afterwkt"), at(ep+"beforeenvoy"), at(ep+"afterenvoy")
	// aftersyscall turns fault-around off: the earlier, the fewer pages come in 64 KiB at a time.
	if as := at(ep + "aftersyscall"); as != at("syscall")+1 && as != at(ep+"pagewise")+1 {
		t.Errorf("aftersyscall is init %d, syscall %d: want it right after syscall (or after pagewise, if that inits)", as, at("syscall"))
	}
	first, last, envoy := -1, -1, 0
	for i, p := range order {
		if strings.HasPrefix(p, "github.com/envoyproxy/go-control-plane/") || strings.HasPrefix(p, "github.com/cncf/xds/") {
			if first < 0 {
				first = i
			}
			if !strings.HasPrefix(p, "github.com/envoyproxy/go-control-plane/envoy/service/") {
				last = i // the services wait for gRPC, which inits after afterenvoy
			}
			envoy++
		}
	}
	if at("google.golang.org/protobuf/types/descriptorpb") > wkt {
		t.Errorf("afterwkt (init %d) runs before the protobuf well-known types", wkt)
	}
	if !(wkt < before && before < first && last < after) {
		t.Errorf("init order: afterwkt %d, beforeenvoy %d, first Envoy/xDS package %d, last (but the services) %d, afterenvoy %d; want them in that order",
			wkt, before, first, last, after)
	}
	// Each drop must leave a share of the inits to the next, or it splits nothing.
	if before-wkt < 20 || after-before < 100 {
		t.Errorf("inits between the drops: %d, then %d (of %d, %d of them Envoy's or xDS's); want at least 20, then 100", before-wkt, after-before, len(order), envoy)
	}
}
