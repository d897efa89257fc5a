package h2wire

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/legateproxy/legate/internal/nettest"
)

// tcpPair is a connected pair of TCP sockets on 127.0.0.1.
func tcpPair(t *testing.T) (client, server net.Conn) {
	return nettest.TCPPair(t)
}

// TestWriterConcurrentFlushes: records appended and flushed by many goroutines at once all
// reach the peer whole (a flush in progress takes what others append), and a write error is
// kept in Err and stops the writing.
func TestWriterConcurrentFlushes(t *testing.T) {
	c, s := tcpPair(t)
	var mu sync.Mutex
	var w Writer
	const writers, records = 8, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := bytes.Repeat([]byte{byte('a' + g)}, 100)
			for range records {
				mu.Lock()
				w.Buf = append(w.Buf, rec...)
				if _, err := w.Flush(&mu, c); err != nil {
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(s, writers*records*100))
		got <- b
	}()
	wg.Wait()
	b := <-got
	if len(b) != writers*records*100 {
		t.Fatalf("read %d bytes; want %d", len(b), writers*records*100)
	}
	for i := 0; i < len(b); i += 100 {
		if r := b[i : i+100]; !bytes.Equal(r, bytes.Repeat(r[:1], 100)) {
			t.Fatalf("record at %d mixes writers: %q", i, r)
		}
	}

	c.Close()
	mu.Lock()
	defer mu.Unlock()
	w.Buf = append(w.Buf, "x"...)
	if flushed, err := w.Flush(&mu, c); !flushed || err == nil || w.Err != err {
		t.Fatalf("flush on a closed socket: flushed %v, err %v, Err %v; want the error kept", flushed, err, w.Err)
	}
	w.Buf = append(w.Buf[:0], "y"...)
	if _, err := w.Flush(&mu, c); err != nil || len(w.Buf) != 1 {
		t.Fatalf("flush after the error: %v, %d bytes left; want nothing written", err, len(w.Buf))
	}
}
