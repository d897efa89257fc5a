package layers

import (
	"encoding/json"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/legateproxy/legate/"

// layerOf places each package by its path: the longest prefix in the table wins. The order
// is docs/DESIGN.md's, from the bottom: shared utilities, stats with the xDS client (its
// transports and watch contract; the owners of its types sit with them), the leaves of the
// data plane (balancing, TLS, runtime), access logs, configuration, the components
// configuration builds (listeners with LDS, health checks, outlier detection, breakers), the
// cluster manager with CDS and EDS, the pools, the proxies (the route table with RDS, VHDS and
// SRDS), then the admin, the server that wires them
// and the list of extensions it is built with, and the binaries. A new top-level package must
// be placed here: the test names it.
var layerOf = map[string]int{
	"internal":   1,
	"logging":    1,
	"options":    1,
	"hotrestart": 1,
	"host":       1,
	"bootstrap":  1,
	"stats":      2,
	"xds":        2,
	"lb":         3,
	"tlsutil":    3,
	"runtime":    3,
	"accesslog":  4,
	"tracing":    4,
	"config":     5,
	"overload":   5,
	"breaker":    6,
	"listener":   6,
	"health":     6,
	"outlier":    6,
	"cluster":    7,
	"pool":       8,
	"httpproxy":  9,
	"tcpproxy":   9,
	"udpproxy":   9,
	"admin":      10,
	"server":     11,
	"extensions": 11,
	"cmd":        12,
	"test":       13,
}

// place returns the layer of a package path inside the module.
func place(path string) (int, bool) {
	rel := strings.TrimPrefix(path, module)
	best, layer := -1, 0
	for prefix, l := range layerOf {
		if (rel == prefix || strings.HasPrefix(rel, prefix+"/")) && len(prefix) > best {
			best, layer = len(prefix), l
		}
	}
	return layer, best >= 0
}

// TestImportsRunDown fails on an import from a package to one of a higher layer, and on a
// package no layer holds. Test files are not counted: tests may drive their package from above.
func TestImportsRunDown(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = "../.."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(out)
	var problems []string
	n := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		from, ok := place(p.ImportPath)
		if !ok {
			problems = append(problems, p.ImportPath+": in no layer (add it to layerOf and docs/DESIGN.md)")
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if to, ok := place(imp); ok && to > from {
				problems = append(problems, p.ImportPath+" (layer "+strconv.Itoa(from)+") imports "+imp+" (layer "+strconv.Itoa(to)+")")
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if n < 40 {
		t.Fatalf("go list listed %d packages; want the whole module", n)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestPlaceKnowsEveryLayer keeps the table's layers within the design's thirteen.
func TestPlaceKnowsEveryLayer(t *testing.T) {
	for prefix, l := range layerOf {
		if l < 1 || l > 13 {
			t.Errorf("%s has layer %d; layers run 1..13", prefix, l)
		}
	}
}
