package hotrestart

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Protocol is the hot-restart protocol version this build speaks. It changes
// whenever a message, a field's meaning or the feature list changes; parent
// and child must speak the same one. Protocol 1: the handshake, "socket",
// "stats", "status", "drain" and "terminate".
const Protocol = 1

// Version is the hot-restart compatibility string: /hot_restart_version,
// --hot-restart-version and /server_info's hot_restart_version. It encodes
// Protocol; Legate never claims Envoy's "11.104", whose shared-memory layout
// does not apply. A test keeps it equal to "legate.<Protocol>".
const Version = "legate.1"

// Features are the requests protocol Protocol carries. A handshake refused
// for a version mismatch names the features one side has and the other
// lacks, so an operator sees what changed between the two binaries.
var features = []string{"admin_socket", "drain", "listen_socket", "stats", "status", "terminate"}

// Features returns the feature list of this build's protocol, sorted.
func Features() []string { return slices.Clone(features) }

// Frame layout: 4 bytes of magic, a 4-byte big-endian body length, then the
// JSON body. File descriptors ride on the header bytes (one sendmsg), so a
// reader that reads exactly a frame's bytes receives them with that frame.
const (
	frameMagic  = "LGHR"
	headerSize  = 8
	maxBodySize = 64 << 20 // a stats snapshot of millions of stats fits
	// maxFDs bounds the descriptors one frame may carry; every message
	// carries at most one.
	maxFDs = 4
)

// Message types. A request's reply has the same type; "error" answers a
// request the peer could not serve.
const (
	typeHello     = "hello"
	typeSocket    = "socket"
	typeStats     = "stats"
	typeStatus    = "status"
	typeDrain     = "drain"
	typeTerminate = "terminate"
	typeError     = "error"
)

// message is one frame's body. Only the field of its type is set. The
// "type", "hello" fields and Hello's fields are frozen across protocol
// versions: they are all two different builds must understand to refuse
// each other clearly.
type message struct {
	Type   string         `json:"type"`
	Hello  *Hello         `json:"hello,omitempty"`
	Socket *SocketMessage `json:"socket,omitempty"`
	Stats  *Stats         `json:"stats,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// Hello is the handshake, sent by the child and answered by the parent.
type Hello struct {
	// Version is the sender's Version string; Protocol its protocol number;
	// Features its feature list.
	Version  string   `json:"version"`
	Protocol int      `json:"protocol"`
	Features []string `json:"features"`
	// Build is the sender's --version string, for the logs.
	Build string `json:"build,omitempty"`
	// Epoch is the sender's --restart-epoch; BaseID its --base-id.
	Epoch  uint32 `json:"epoch"`
	BaseID uint32 `json:"base_id"`
	// PID is the sender's process id.
	PID int `json:"pid"`
	// StartUnixNano is, in the parent's reply, when the first epoch of
	// this line of restarts started (uptime_all_epochs, server.uptime).
	StartUnixNano int64 `json:"start_unix_nano,omitempty"`
	// Refused is set in a reply that refuses the child, with the reason.
	Refused string `json:"refused,omitempty"`
}

// SocketMessage asks for a listening socket (child) or answers (parent).
type SocketMessage struct {
	// Kind is "listener" or "admin".
	Kind string `json:"kind"`
	// Address is the configured address the child binds (config.Address
	// text, "127.0.0.1:0" included): the parent passes its socket only when
	// it was configured with the same address.
	Address string `json:"address"`
	// Found is set in the reply when a descriptor accompanies it.
	Found bool `json:"found,omitempty"`
	// Bound is the socket's local address in the reply, for the logs.
	Bound string `json:"bound,omitempty"`
}

// Socket kinds.
const (
	KindListener = "listener"
	KindAdmin    = "admin"
)

// Stats is the parent's statistics snapshot: every used counter, and every
// used gauge whose import mode is Accumulate (Gauges) or HiddenAccumulate
// (HiddenGauges), by full name. Counters carry totals, not deltas, so a
// lost reply costs nothing: the child turns totals into deltas itself.
type Stats struct {
	Counters     map[string]uint64 `json:"counters,omitempty"`
	Gauges       map[string]uint64 `json:"gauges,omitempty"`
	HiddenGauges map[string]uint64 `json:"hidden_gauges,omitempty"`
	// ActiveConnections is the parent's open downstream connections
	// (server.parent_connections in the child).
	ActiveConnections int64 `json:"active_connections"`
	// Draining reports that the parent has stopped accepting and drains.
	Draining bool `json:"draining,omitempty"`
}

// VersionError is a handshake refused because the two sides speak different
// protocols (or are not parent and child epochs of one another). Its message
// names both versions and what differs.
type VersionError struct {
	// Reason says what differs.
	Reason string
}

func (e *VersionError) Error() string { return "hot restart refused: " + e.Reason }

// ErrNoParent wraps the failure to reach the parent's socket.
var ErrNoParent = errors.New("no hot-restart parent")

// checkHello returns why a peer's hello cannot be accepted by a side whose
// own hello is mine, or "". wantEpoch is the epoch the peer must have.
func checkHello(mine, peer *Hello, peerRole string, wantEpoch uint32) string {
	if peer.Protocol != mine.Protocol || peer.Version != mine.Version {
		var b strings.Builder
		fmt.Fprintf(&b, "hot restart version mismatch: this process (epoch %d) speaks %q (protocol %d), the %s (epoch %d, pid %d, build %q) speaks %q (protocol %d)",
			mine.Epoch, mine.Version, mine.Protocol, peerRole, peer.Epoch, peer.PID, peer.Build, peer.Version, peer.Protocol)
		if only := missing(peer.Features, mine.Features); len(only) > 0 {
			fmt.Fprintf(&b, "; only the %s has %s", peerRole, strings.Join(only, ", "))
		}
		if only := missing(mine.Features, peer.Features); len(only) > 0 {
			fmt.Fprintf(&b, "; only this process has %s", strings.Join(only, ", "))
		}
		return b.String()
	}
	if peer.BaseID != mine.BaseID {
		return fmt.Sprintf("base id mismatch: this process has --base-id %d, the %s %d", mine.BaseID, peerRole, peer.BaseID)
	}
	if peer.Epoch != wantEpoch {
		return fmt.Sprintf("epoch mismatch: the %s has --restart-epoch %d; want %d (this process has %d)", peerRole, peer.Epoch, wantEpoch, mine.Epoch)
	}
	return ""
}

// missing returns the entries of a that b lacks.
func missing(a, b []string) []string {
	var out []string
	for _, f := range a {
		if !slices.Contains(b, f) {
			out = append(out, f)
		}
	}
	return out
}

// conn is one end of a hot-restart connection.
type conn struct {
	uc *net.UnixConn
}

// write sends m, with fd attached when fd >= 0.
func (c *conn) write(m *message, fd int) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) > maxBodySize {
		return fmt.Errorf("hot restart: %s message of %d bytes; must be at most %d", m.Type, len(body), maxBodySize)
	}
	var hdr [headerSize]byte
	copy(hdr[:], frameMagic)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(body)))
	var oob []byte
	if fd >= 0 {
		oob = syscall.UnixRights(fd)
	}
	n, _, err := c.uc.WriteMsgUnix(hdr[:], oob, nil)
	if err != nil {
		return err
	}
	if _, err := c.uc.Write(append(hdr[n:], body...)); err != nil {
		return err
	}
	return nil
}

// read receives one message and the descriptors that came with it. The
// caller owns the returned files.
func (c *conn) read() (*message, []*os.File, error) {
	var hdr [headerSize]byte
	var fds []int
	if err := c.readFull(hdr[:], &fds); err != nil {
		closeFDs(fds)
		return nil, nil, err
	}
	size, err := parseHeader(hdr[:])
	if err != nil {
		closeFDs(fds)
		return nil, nil, err
	}
	body := make([]byte, size)
	if err := c.readFull(body, &fds); err != nil {
		closeFDs(fds)
		return nil, nil, err
	}
	m, err := parseBody(body)
	if err != nil {
		closeFDs(fds)
		return nil, nil, err
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "hot-restart-"+strconv.Itoa(fd))
	}
	return m, files, nil
}

// readFull fills b, collecting descriptors from control messages.
func (c *conn) readFull(b []byte, fds *[]int) error {
	oob := make([]byte, syscall.CmsgSpace(maxFDs*4))
	for got := 0; got < len(b); {
		n, oobn, flags, _, err := c.uc.ReadMsgUnix(b[got:], oob)
		if oobn > 0 {
			cms, perr := syscall.ParseSocketControlMessage(oob[:oobn])
			if perr == nil {
				for _, cm := range cms {
					if rights, err := syscall.ParseUnixRights(&cm); err == nil {
						*fds = append(*fds, rights...)
					}
				}
			}
		}
		if flags&syscall.MSG_CTRUNC != 0 {
			return fmt.Errorf("hot restart: descriptors truncated; a frame carries at most %d", maxFDs)
		}
		got += n
		if err != nil {
			if got == len(b) {
				return nil
			}
			return err
		}
		if n == 0 {
			return errors.New("hot restart: connection closed mid-frame")
		}
	}
	return nil
}

// parseHeader checks a frame header and returns the body size.
func parseHeader(h []byte) (int, error) {
	if len(h) != headerSize {
		return 0, fmt.Errorf("hot restart: frame header of %d bytes; must be %d", len(h), headerSize)
	}
	if string(h[:4]) != frameMagic {
		return 0, fmt.Errorf("hot restart: frame magic %q; must be %q (is the peer a Legate?)", h[:4], frameMagic)
	}
	size := binary.BigEndian.Uint32(h[4:])
	if size == 0 || size > maxBodySize {
		return 0, fmt.Errorf("hot restart: frame body of %d bytes; must be 1 to %d", size, maxBodySize)
	}
	return int(size), nil
}

// parseBody decodes a frame body. Unknown fields are ignored, so a newer
// peer's hello still decodes and can be refused with a clear reason.
func parseBody(b []byte) (*message, error) {
	m := &message{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("hot restart: message: %w", err)
	}
	var ok bool
	switch m.Type {
	case typeHello:
		ok = m.Hello != nil
	case typeSocket:
		ok = m.Socket != nil
	case typeStats, typeStatus, typeDrain, typeTerminate, typeError:
		ok = true
	default:
		return nil, fmt.Errorf("hot restart: message type %q; must be one of hello, socket, stats, status, drain, terminate, error", m.Type)
	}
	if !ok {
		return nil, fmt.Errorf("hot restart: %s message without its %q field", m.Type, m.Type)
	}
	return m, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
