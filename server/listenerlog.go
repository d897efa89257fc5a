package server

import (
	"fmt"
	"net"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/listener"
)

// lineLogger is one of a listener's access_log entries: its filter, format and file.
type lineLogger struct {
	filter *accesslog.Filter
	format *accesslog.Formatter
	file   *accesslog.File
}

// listenerAccessLogs builds a listener's access_log. As in Envoy, it logs the connections
// that no filter chain matched, with response flag NR and details filter_chain_not_found.
// The registry's accesslog.ListenerLoggers are implemented (file, stdout, stderr); others
// are refused.
func (s *Server) listenerAccessLogs(l *config.Listener) (listener.NoChainLog, error) {
	var logs []lineLogger
	for i, al := range l.AccessLogs {
		path := fmt.Sprintf("access_log[%d]", i)
		filter := al.Filter.Bind(accesslog.FilterOptions{Runtime: s.runtimeUint64})
		l, found, err := accesslog.Build(s.ext, accesslog.ListenerLoggers, path+".typed_config", al.Name, al.TypedConfig, accesslog.LoggerContext{})
		if !found {
			return nil, fmt.Errorf("%s (%q, name %q): only %s are implemented for listener access logs; not implemented by Legate",
				path+".typed_config", al.TypedConfig.GetTypeUrl(), al.Name, accesslog.Implemented(s.ext, accesslog.ListenerLoggers))
		}
		if err != nil {
			return nil, err
		}
		file, err := s.data.accessLogs.Open(l.Line.Path)
		if err != nil {
			return nil, fmt.Errorf("%s.typed_config: %w", path, err)
		}
		logs = append(logs, lineLogger{filter: filter, format: l.Line.Format, file: file})
	}
	return func(c listener.NoChainConn) { logNoChain(logs, c) }, nil
}

// logNoChain writes the entry of a connection no filter chain matched to each logger whose
// filter passes it. Such connections are rare (a scan, a misrouted client), so the entry and
// line are allocated per call.
func logNoChain(logs []lineLogger, c listener.NoChainConn) {
	e := accesslog.Entry{
		StartTime:               c.Start,
		ResponseCodeDetails:     "filter_chain_not_found",
		ResponseFlags:           accesslog.NoRouteFound,
		DownstreamRemoteAddress: addrString(c.Remote),
		DownstreamLocalAddress:  addrString(c.Local),
		RequestedServerName:     c.SNI,
		ConnectionID:            c.ID,
		DynamicMetadata:         c.Metadata,
		FilterState:             c.FilterState,
	}
	e.DownstreamDirectRemoteAddress = addrString(c.DirectRemote)
	var buf []byte
	for _, l := range logs {
		if l.filter.Match(&e) {
			buf = l.format.Format(buf[:0], &e)
			l.file.Write(buf)
		}
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
