package als

import (
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"

	"github.com/legateproxy/legate/accesslog"
)

// TCPLogger is one envoy.access_loggers.tcp_grpc access log (TcpGrpcAccessLogConfig): a
// buffer of TCPAccessLogEntry messages and the stream they go to, with the same buffering,
// flushing and drop accounting as HTTPLogger. Log and Flush are safe for concurrent use.
type TCPLogger struct {
	*client[*accesslogdatav3.TCPAccessLogEntry]
}

func (m *Manager) newTCPLogger(s settings) (*TCPLogger, error) {
	c, err := newClient(m, s, func(es []*accesslogdatav3.TCPAccessLogEntry) *alsv3.StreamAccessLogsMessage {
		return &alsv3.StreamAccessLogsMessage{LogEntries: &alsv3.StreamAccessLogsMessage_TcpLogs{
			TcpLogs: &alsv3.StreamAccessLogsMessage_TCPAccessLogEntries{LogEntry: es},
		}}
	})
	if err != nil {
		return nil, err
	}
	return &TCPLogger{client: c}, nil
}

// Log converts e (one TCP proxy connection, at its end or an intermediate point) into a
// TCPAccessLogEntry and buffers it, as HTTPLogger.Log does. e is not kept.
func (l *TCPLogger) Log(e *accesslog.Entry) {
	if l.dropFull() {
		return
	}
	l.add(l.entry(e))
}

// entry converts a TCP entry: the common properties and the downstream connection's bytes
// (connection_properties.received_bytes and sent_bytes, as %BYTES_RECEIVED% and %BYTES_SENT%).
func (l *TCPLogger) entry(e *accesslog.Entry) *accesslogdatav3.TCPAccessLogEntry {
	return &accesslogdatav3.TCPAccessLogEntry{
		CommonProperties: commonProperties(e, &l.s),
		ConnectionProperties: &accesslogdatav3.ConnectionProperties{
			ReceivedBytes: e.BytesReceived,
			SentBytes:     e.BytesSent,
		},
	}
}
