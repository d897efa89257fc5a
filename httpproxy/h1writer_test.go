package httpproxy

import (
	"errors"
	"net"
	"reflect"
	"syscall"
	"testing"

	"github.com/legateproxy/legate/stats"
)

// TestH1WriterBegin holds h1writer.begin to the literal it stands for, h1writer{conn: ...,
// raw: ..., fd: ..., send: ..., idle: ..., buf: ..., tx: ..., line: ...}: after it, a writer
// that held something in every field (a field added to h1writer must be set here, and reset
// by begin) has the fields it was given and every other one zero.
func TestH1WriterBegin(t *testing.T) {
	type fakeConn struct{ net.Conn }
	type fakeRaw struct{ syscall.RawConn }
	oldSend, newSend := func(uintptr) bool { return false }, func(uintptr) bool { return true }
	fail := errors.New("x")
	w := h1writer{conn: fakeConn{}, raw: fakeRaw{}, fd: new(int), send: oldSend, pending: []byte("p"), sendN: 1,
		sendErr: fail, waited: true, stamped: true, idle: &streamIdle{}, buf: []byte("b"), chunked: true,
		noBody: true, tx: &stats.HotBlock[hcmLine]{}, line: 3, err: fail, sent: 1, trailer: []byte("t")}
	v := reflect.ValueOf(w)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("h1writer.%s is zero before begin; give it a value here", v.Type().Field(i).Name)
		}
	}

	conn, raw, fd, idle, buf, tx := &fakeConn{}, &fakeRaw{}, new(int), &streamIdle{}, make([]byte, 0, 8), &stats.HotBlock[hcmLine]{}
	w.begin(conn, raw, fd, newSend, idle, buf, tx, 5)
	want := h1writer{conn: conn, raw: raw, fd: fd, idle: idle, buf: buf, tx: tx, line: 5}
	if reflect.ValueOf(w.send).Pointer() != reflect.ValueOf(newSend).Pointer() {
		t.Errorf("after begin, send is not the function given")
	}
	w.send = nil // funcs are not compared by DeepEqual
	if !reflect.DeepEqual(w, want) {
		t.Errorf("after begin = %+v; want %+v", w, want)
	}
}
