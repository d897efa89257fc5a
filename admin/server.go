package admin

import (
	"bytes"
	"io"
	"net/http"
	goruntime "runtime"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/pbjson"
)

// ServerView is what the server-level endpoints read and drive. The server
// package implements it.
type ServerView interface {
	// ServerInfo is a fresh /server_info message (state, uptimes, options, node).
	ServerInfo() *adminv3.ServerInfo
	// HotRestartVersion is the /hot_restart_version body ("disabled" when off).
	HotRestartVersion() string
	// Quit starts a clean shutdown; it must not block the reply.
	Quit()
	// ReopenLogs reopens the log file and access logs.
	ReopenLogs() error
	// UnreadyTargets lists the init targets still pending for the /init_dump
	// mask ("" for all components).
	UnreadyTargets(mask string) *adminv3.UnreadyTargetsDumps
}

// ServerEndpoints returns /ready, /server_info, /hot_restart_version,
// /quitquitquit, /reopen_logs, /init_dump and /memory.
func ServerEndpoints(v ServerView) []Endpoint {
	return []Endpoint{
		{
			Path: "/ready",
			Help: "print server state, return 200 if LIVE, otherwise return 503",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				state := v.ServerInfo().GetState()
				if state != adminv3.ServerInfo_LIVE {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				io.WriteString(w, state.String()+"\n")
			},
		},
		{
			Path: "/server_info",
			Help: "print server version/status information",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				writeServerInfo(w, v.ServerInfo())
			},
		},
		{
			Path: "/hot_restart_version",
			Help: "print the hot restart compatibility version",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				io.WriteString(w, v.HotRestartVersion())
			},
		},
		{
			Path:    "/quitquitquit",
			Help:    "exit the server",
			Mutates: true,
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				io.WriteString(w, "OK\n")
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
				v.Quit()
			},
		},
		{
			Path:    "/reopen_logs",
			Help:    "reopen access logs",
			Mutates: true,
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				if err := v.ReopenLogs(); err != nil {
					w.WriteHeader(http.StatusInternalServerError)
					io.WriteString(w, err.Error()+"\n")
					return
				}
				io.WriteString(w, "OK\n")
			},
		},
		{
			Path: "/init_dump",
			Help: "dump current Envoy init manager information (experimental)",
			Params: []Param{{
				Name: "mask",
				Help: "The desired component to dump unready targets. The mask is parsed as a Protobuf::FieldMask. For example, get the unready targets of all listeners with /init_dump?mask=listener`",
				Kind: ParamString,
			}},
			Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
				mask, _ := q.NonEmpty("mask")
				writeProto(w, v.UnreadyTargets(mask), pbjson.OmitDefaults)
			},
		},
		{
			Path:   "/memory",
			Help:   "print current allocation/heap usage",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) { writeProto(w, Memory(), pbjson.AllFields) },
		},
	}
}

// Memory fills Envoy's Memory message from the Go runtime: allocated is the
// live heap, heap_size what the heap holds from the OS, pageheap_unmapped what
// was returned to it, pageheap_free idle spans still mapped, and
// total_physical_bytes everything the runtime holds less what it released.
// Go has no per-thread caches in tcmalloc's sense, so total_thread_cache is
// the mcache bytes in use.
func Memory() *adminv3.Memory {
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return &adminv3.Memory{
		Allocated:          m.HeapAlloc,
		HeapSize:           m.HeapSys,
		PageheapUnmapped:   m.HeapReleased,
		PageheapFree:       m.HeapIdle - m.HeapReleased,
		TotalThreadCache:   m.MCacheInuse,
		TotalPhysicalBytes: m.Sys - m.HeapReleased,
	}
}

// writeProto writes m as Envoy's pretty proto JSON.
// writeServerInfo writes info as writeProto does, with the spec's
// command_line_options.hot_restart_version added after log_path. The field
// was Envoy's v2 field 12, which v3's message reserves, so the encoder
// cannot print it. It is always false here: --hot-restart-version prints the
// version and exits before anything serves.
func writeServerInfo(w http.ResponseWriter, info *adminv3.ServerInfo) {
	body, err := pbjson.Marshal(info, pbjson.AllFields)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "cannot render server info: "+err.Error()+"\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(withHotRestartVersionOption(body))
}

// withHotRestartVersionOption inserts the hot_restart_version line after
// command_line_options' log_path line (a JSON string holds no raw newline,
// so the line ends at the next one).
func withHotRestartVersionOption(body []byte) []byte {
	const anchor = "\n  \"log_path\": "
	i := bytes.Index(body, []byte(anchor))
	if i < 0 {
		return body
	}
	end := bytes.IndexByte(body[i+len(anchor):], '\n')
	if end < 0 {
		return body
	}
	at := i + len(anchor) + end + 1
	out := make([]byte, 0, len(body)+32)
	out = append(out, body[:at]...)
	out = append(out, "  \"hot_restart_version\": false,\n"...)
	return append(out, body[at:]...)
}

func writeProto(w http.ResponseWriter, m proto.Message, mode pbjson.Mode) {
	body, err := pbjson.Marshal(m, mode)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "cannot render "+string(m.ProtoReflect().Descriptor().FullName())+": "+err.Error()+"\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}
