package health

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	datav3 "github.com/envoyproxy/go-control-plane/envoy/data/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// eventLog writes envoy.data.core.v3.HealthCheckEvent messages as JSON lines, as Envoy's
// event_log_path does: proto field names, primitive fields printed even when zero (so enums show
// by name), one compact object per line. A nil *eventLog logs nothing.
type eventLog struct {
	cluster string
	kind    config.HealthCheckKind
	now     func() time.Time

	// mu serialises writes to w.
	mu sync.Mutex
	w  io.Writer
}

var eventJSON = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

// log builds the event for h, lets set fill in its event case, and writes the line. Write errors
// are dropped: a full disk must not stop health checking.
func (l *eventLog) log(h *host.Host, set func(*datav3.HealthCheckEvent)) {
	if l == nil {
		return
	}
	ev := &datav3.HealthCheckEvent{
		HealthCheckerType: datav3.HealthCheckerType(l.kind),
		Host:              addressProto(h.Address()),
		ClusterName:       l.cluster,
		Timestamp:         timestamppb.New(l.now()),
	}
	if loc := h.Locality(); loc != (host.Locality{}) {
		ev.Locality = &corev3.Locality{Region: loc.Region, Zone: loc.Zone, SubZone: loc.SubZone}
	}
	set(ev)
	b, err := eventJSON.Marshal(ev)
	if err != nil {
		return
	}
	// protojson varies its spacing on purpose; compact it so lines are stable.
	var line bytes.Buffer
	line.Grow(len(b) + 1)
	if json.Compact(&line, b) != nil {
		return
	}
	line.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(line.Bytes())
}

// addressProto turns "ip:port" into a core.Address socket address (protocol TCP).
func addressProto(addr string) *corev3.Address {
	hostPart, portPart, err := net.SplitHostPort(addr)
	if err != nil {
		return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: addr}}}
	}
	port, _ := strconv.ParseUint(portPart, 10, 32)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       hostPart,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}
