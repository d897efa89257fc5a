package tcpproxy

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/listener"
)

// AccessLogDeps are what the TCP proxy's access_log entries are built with. The zero value
// refuses every access logger.
type AccessLogDeps struct {
	// Files opens and shares the files of envoy.access_loggers.file, stdout and stderr (they
	// write to /dev/stdout and /dev/stderr); nil refuses those loggers.
	Files *accesslog.Manager
	// GRPC makes envoy.access_loggers.tcp_grpc loggers; nil refuses them.
	GRPC *als.Manager
	// Loggers are the access loggers' factories (accesslog.TCPLoggers); nil means the
	// built-in set (accesslog's and als' loggers).
	Loggers *registry.Registry
	// Runtime reads the runtime_key overrides of access log filter comparisons; nil uses
	// their default_value.
	Runtime func(key string, def uint64) uint64
	// Hostname is what %HOSTNAME% prints; empty means os.Hostname().
	Hostname string
}

// accessLogger is one access_log entry: its filter and its sink, a formatted line written to
// a file or an entry sent to a gRPC access log service.
type accessLogger struct {
	filter *accesslog.Filter
	format *accesslog.Formatter
	file   *accesslog.File
	// entries, when set, receives the entries instead (tcp_grpc).
	entries accesslog.EntryLogger
}

// buildAccessLogs builds the access_log entries of cfg.
func buildAccessLogs(cfg *config.TCPProxy, d AccessLogDeps) ([]accessLogger, error) {
	var out []accessLogger
	if d.Loggers == nil && len(cfg.AccessLogs) > 0 {
		var err error
		if d.Loggers, err = accesslog.Builtin(als.Register); err != nil {
			return nil, err
		}
	}
	for i, al := range cfg.AccessLogs {
		path := fmt.Sprintf("access_log[%d]", i)
		l, err := buildAccessLog(path, al, d)
		if err != nil {
			return nil, fmt.Errorf("tcp_proxy %q: %w", cfg.StatPrefix, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// buildAccessLog builds an access_log entry with the factory the registry's
// accesslog.TCPLoggers has for it.
func buildAccessLog(path string, al config.TCPAccessLog, d AccessLogDeps) (accessLogger, error) {
	typed := path + ".typed_config"
	c := accesslog.LoggerContext{Hostname: d.Hostname}
	if d.GRPC != nil {
		c.Services = d.GRPC
	}
	built, found, err := accesslog.Build(d.Loggers, accesslog.TCPLoggers, typed, al.Name, al.TypedConfig, c)
	switch {
	case !found:
		return accessLogger{}, fmt.Errorf("%s (%q, name %q): only %s are implemented for the TCP proxy", typed, al.TypedConfig.GetTypeUrl(), al.Name, accesslog.Implemented(d.Loggers, accesslog.TCPLoggers))
	case err != nil:
		return accessLogger{}, err
	}
	l := accessLogger{filter: al.Filter.Bind(accesslog.FilterOptions{Runtime: d.Runtime}), entries: built.Entries, format: built.Line.Format}
	if l.entries != nil {
		return l, nil
	}
	if d.Files == nil {
		return accessLogger{}, fmt.Errorf("%s (%q): file access logs are not available", typed, al.TypedConfig.GetTypeUrl())
	}
	if l.file, err = d.Files.Open(built.Line.Path); err != nil {
		return accessLogger{}, fmt.Errorf("%s: %w", typed, err)
	}
	return l, nil
}

// connInfo is what the access log knows about one downstream connection. The fields set
// before the connection is proxied are written by the connection goroutine only; bytes and
// flags change while periodic entries read them, so they are atomic.
type connInfo struct {
	start         time.Time
	id            uint64 // the listener connection's id
	local, remote string
	direct        string // the socket's peer; remote may come from a PROXY protocol header
	restored      bool   // local is the connection's original destination (ORIGINAL_DST clusters)
	sni           string
	tls           *accesslog.TLSInfo // set once the handshake succeeded
	cluster       string             // set once the cluster is found
	filterCluster string             // the envoy.tcp_proxy.cluster filter state (sni_cluster), "" for none
	host          string             // the upstream host attempted last
	upstreamLocal string
	attempts      uint32
	flags         atomic.Uint64 // accesslog.ResponseFlags
	rx, tx        atomic.Uint64 // bytes received from and sent to downstream
	// metadata is the connection's dynamic metadata (%DYNAMIC_METADATA%); read only.
	metadata map[string]*structpb.Struct
	// downstream is what an upstream PROXY protocol socket tells the host: the connection's
	// addresses and the PROXY TLVs kept for it.
	downstream proxyproto.Downstream
	// source is the original_src listener filter's bind address for the upstream connection.
	source *sockopt.Source
	// state is the downstream connection's filter state (%FILTER_STATE%): the listener's
	// connection's, or one of the session's own for another net.Conn.
	state *filterstate.State

	// mu orders the entries: no periodic entry follows the final one. ended is set when the
	// final entry is logged. mu guards ended.
	mu    sync.Mutex
	ended bool
}

func newConnInfo(down net.Conn) *connInfo {
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	ci := &connInfo{start: time.Now(), local: addrString(down.LocalAddr()), remote: addrString(down.RemoteAddr())}
	ci.direct = ci.remote
	ci.downstream = proxyproto.Downstream{Source: down.RemoteAddr(), Destination: down.LocalAddr()}
	if lc, ok := down.(*listener.Conn); ok {
		ci.downstream.TLVs = lc.ProxyProtocolTLVs()
		ci.sni, ci.id, ci.restored = lc.ServerName(), lc.ID(), lc.LocalAddressRestored()
		ci.metadata = lc.DynamicMetadata()
		ci.source = lc.UpstreamSource()
		ci.direct = addrString(lc.DirectRemoteAddr())
		ci.state = lc.FilterState()
	} else {
		ci.state = &filterstate.State{}
	}
	return ci
}

// setTLS records the terminated TLS connection; the handshake's SNI stands in when the TLS
// inspector did not read one.
func (ci *connInfo) setTLS(t *accesslog.TLSInfo) {
	ci.tls = t
	if ci.sni == "" {
		ci.sni = t.State.ServerName
	}
}

// UpstreamSource returns the original_src listener filter's bind address for the downstream
// connection's upstream connections (pool.Origin); nil for none.
func (ci *connInfo) UpstreamSource() *sockopt.Source { return ci.source }

// RemoteAddr, LocalAddr and ProxyProtocolTLVs are the downstream connection's PROXY protocol
// state (pool.Origin), which an upstream proxy_protocol socket describes.
func (ci *connInfo) RemoteAddr() net.Addr                { return ci.downstream.Source }
func (ci *connInfo) LocalAddr() net.Addr                 { return ci.downstream.Destination }
func (ci *connInfo) ProxyProtocolTLVs() []proxyproto.TLV { return ci.downstream.TLVs }

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func (ci *connInfo) setFlag(f accesslog.ResponseFlags) {
	for {
		old := ci.flags.Load()
		if ci.flags.CompareAndSwap(old, old|uint64(f)) {
			return
		}
	}
}

// entry is the access log entry of the connection now, for an event of type t. Envoy's
// %DURATION% of a TCP connection is the time since it was accepted, also in intermediate
// entries; %RESPONSE_CODE% prints 0 and the HTTP operators "-".
func (ci *connInfo) entry(t accesslog.Type) accesslog.Entry {
	return accesslog.Entry{
		StartTime:                     ci.start,
		ResponseFlags:                 accesslog.ResponseFlags(ci.flags.Load()),
		BytesReceived:                 ci.rx.Load(),
		BytesSent:                     ci.tx.Load(),
		Duration:                      max(time.Since(ci.start), 1), // real clock: request path (internal/clock's allowedDirect)
		DownstreamRemoteAddress:       ci.remote,
		DownstreamDirectRemoteAddress: ci.direct,
		DownstreamLocalAddress:        ci.local,
		UpstreamHost:                  ci.host,
		UpstreamLocalAddress:          ci.upstreamLocal,
		UpstreamCluster:               ci.cluster,
		UpstreamRequestAttemptCount:   ci.attempts,
		RequestedServerName:           ci.sni,
		DownstreamTLS:                 ci.tls,
		ConnectionID:                  ci.id,
		DynamicMetadata:               ci.metadata,
		FilterState:                   ci.state,
		Type:                          t,
	}
}

// accessLog writes an entry of type t to every access log whose filter passes it. The final entry
// (TcpConnectionEnd) is logged once; no entry is logged after it.
func (p *Proxy) accessLog(ci *connInfo, t accesslog.Type) {
	if len(p.logs) == 0 {
		return
	}
	ci.mu.Lock()
	defer ci.mu.Unlock()
	if ci.ended {
		return
	}
	ci.ended = t == accesslog.TypeTCPConnectionEnd
	e := ci.entry(t)
	var line []byte
	for i := range p.logs {
		l := &p.logs[i]
		if !l.filter.Match(&e) {
			continue
		}
		if l.entries != nil {
			l.entries.Log(&e)
			continue
		}
		line = l.format.Format(line[:0], &e)
		if _, err := l.file.Write(line); err != nil {
			p.log.Debugf("tcp_proxy %q: access log: %v", p.cfg.StatPrefix, err)
		}
	}
}
