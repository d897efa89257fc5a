package admin

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"sync"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"

	"github.com/legateproxy/legate/internal/pbjson"
)

// Profiler holds the state of the profiler endpoints. Go's runtime/pprof
// stands in for gperftools and tcmalloc: every profile it writes is a pprof
// file that `go tool pprof` reads. Safe for concurrent use.
type Profiler struct {
	path         string     // admin.profile_path
	mutexTracing bool       // --enable-mutex-tracing
	mu           sync.Mutex // guards cpuFile and the toggles
	cpuFile      *os.File   // non-nil while the CPU profiler runs
	heapToggle   toggle
	allocsToggle toggle
}

// NewProfiler returns the profiler state for profile_path. With
// mutexTracing it turns on Go's mutex profiling for /contention.
func NewProfiler(profilePath string, mutexTracing bool) *Profiler {
	if mutexTracing {
		goruntime.SetMutexProfileFraction(1)
	}
	p := &Profiler{path: profilePath, mutexTracing: mutexTracing}
	p.heapToggle = toggle{
		startBody: "Starting heap profiler",
		already:   "Fail to start heap profiler: already started",
		notActive: "Fail to stop heap profiler: not started",
		stop: func(w http.ResponseWriter) {
			if err := writeProfileFile(p.path, "heap"); err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, "Fail to write the heap profile: "+err.Error())
				return
			}
			fmt.Fprintf(w, "Heap profiler stopped and data written to %s. Read it with `go tool pprof`.", p.path)
		},
	}
	p.allocsToggle = toggle{
		startBody: "OK\n",
		already:   "Allocation profiler has already started",
		notActive: "Allocation profiler is not started",
		stop:      func(w http.ResponseWriter) { writeProfile(w, "allocs") },
	}
	return p
}

var enableParam = Param{Name: "enable", Kind: ParamEnum, Choices: []string{"y", "n"}}

// enableValue applies Envoy's rule: exactly one parameter, enable=y|n.
func enableValue(w http.ResponseWriter, q Query) (on, ok bool) {
	if len(q) == 1 && len(q["enable"]) == 1 {
		switch q.Get("enable") {
		case "y":
			return true, true
		case "n":
			return false, true
		}
	}
	w.WriteHeader(http.StatusBadRequest)
	io.WriteString(w, "?enable=<y|n>\n")
	return false, false
}

// Endpoints returns /cpuprofiler, /heapprofiler, /heap_dump, /allocprofiler
// and /contention.
func (p *Profiler) Endpoints() []Endpoint {
	param := func(help string) []Param {
		e := enableParam
		e.Help = help
		return []Param{e}
	}
	return []Endpoint{
		{Path: "/cpuprofiler", Help: "enable/disable the CPU profiler", Mutates: true, Params: param("enables the CPU profiler"), Handle: p.cpu},
		{Path: "/heapprofiler", Help: "enable/disable the heap profiler", Mutates: true, Params: param("enable/disable the heap profiler"), Handle: p.heap},
		{Path: "/allocprofiler", Help: "enable/disable the allocation profiler (if supported)", Mutates: true, Params: param("enable/disable the allocation profiler"), Handle: p.allocs},
		{Path: "/heap_dump", Help: "dump current Envoy heap (if supported)", Handle: p.heapDump},
		{Path: "/contention", Help: "dump current Envoy mutex contention stats (if enabled)", Handle: p.contention},
	}
}

func (p *Profiler) cpu(w http.ResponseWriter, _ *http.Request, q Query) {
	on, ok := enableValue(w, q)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.cpuFile == nil:
		f, err := os.Create(p.path)
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "failure to start the profiler")
			return
		}
		p.cpuFile = f
	case !on && p.cpuFile != nil:
		pprof.StopCPUProfile()
		p.cpuFile.Close()
		p.cpuFile = nil
	}
	io.WriteString(w, "OK\n")
}

// toggle is a profiler switched on and off by enable=y|n, with Envoy's
// replies for each transition. stop writes the reply of a successful stop.
type toggle struct {
	started                       bool
	startBody, already, notActive string
	stop                          func(w http.ResponseWriter)
}

// switchToggle applies enable=y|n to t under p.mu.
func (p *Profiler) switchToggle(w http.ResponseWriter, q Query, t *toggle) {
	on, ok := enableValue(w, q)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && t.started:
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, t.already)
	case on:
		t.started = true
		io.WriteString(w, t.startBody)
	case !t.started:
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, t.notActive)
	default:
		t.started = false
		t.stop(w)
	}
}

func (p *Profiler) heap(w http.ResponseWriter, _ *http.Request, q Query) {
	p.switchToggle(w, q, &p.heapToggle)
}

func (p *Profiler) allocs(w http.ResponseWriter, _ *http.Request, q Query) {
	p.switchToggle(w, q, &p.allocsToggle)
}

func (p *Profiler) heapDump(w http.ResponseWriter, _ *http.Request, _ Query) {
	writeProfile(w, "heap")
}

func (p *Profiler) contention(w http.ResponseWriter, _ *http.Request, _ Query) {
	if !p.mutexTracing {
		io.WriteString(w, "Mutex contention tracing is not enabled. To enable, run Envoy with flag --enable-mutex-tracing.")
		return
	}
	// Go records contention per call stack with the cycles spent waiting;
	// nothing tells how long current waiters have waited, so that field is 0.
	n, _ := goruntime.MutexProfile(nil)
	records := make([]goruntime.BlockProfileRecord, n+16)
	n, _ = goruntime.MutexProfile(records)
	stats := &adminv3.MutexStats{}
	for _, r := range records[:n] {
		stats.NumContentions += uint64(r.Count)
		stats.LifetimeWaitCycles += uint64(r.Cycles)
	}
	writeProto(w, stats, pbjson.AllFields)
}

// writeProfile renders the named pprof profile into the response, buffered
// so a failure can still change the status.
func writeProfile(w http.ResponseWriter, name string) {
	var buf bytes.Buffer
	if err := pprof.Lookup(name).WriteTo(&buf, 0); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "cannot write the "+name+" profile: "+err.Error())
		return
	}
	w.Write(buf.Bytes())
}

func writeProfileFile(path, name string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
