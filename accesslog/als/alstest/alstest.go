package alstest

import (
	"context"
	"net"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"google.golang.org/grpc"

	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/stats"
)

// Server is an AccessLogService that hands every message it receives to Msgs, in the
// order each stream receives them. It serves until the test ends.
type Server struct {
	// Addr is the address the service listens on.
	Addr string
	// Msgs has room for 100 messages; a stream waits while it is full.
	Msgs <-chan *alsv3.StreamAccessLogsMessage
}

// Start serves a Server on 127.0.0.1 until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return Serve(t, listen(t))
}

// Serve serves a Server on lis, which it closes when the test ends.
func Serve(t testing.TB, lis net.Listener) *Server {
	t.Helper()
	msgs := make(chan *alsv3.StreamAccessLogsMessage, 100)
	serve(t, lis, func(ctx context.Context, m *alsv3.StreamAccessLogsMessage) {
		select {
		case msgs <- m:
		case <-ctx.Done():
		}
	})
	return &Server{Addr: lis.Addr().String(), Msgs: msgs}
}

// Handle serves an AccessLogService on 127.0.0.1 until the test ends and returns its
// address. receive is called with every message received, on the goroutine of the message's
// stream: concurrent streams call it concurrently.
func Handle(t testing.TB, receive func(*alsv3.StreamAccessLogsMessage)) string {
	t.Helper()
	lis := listen(t)
	serve(t, lis, func(_ context.Context, m *alsv3.StreamAccessLogsMessage) { receive(m) })
	return lis.Addr().String()
}

// RunManager runs an als.Manager (node "node-1", stats in a store of its own) that opens
// its streams with dial, until the test ends; Run returning an error fails the test.
func RunManager(t testing.TB, dial func(ctx context.Context, cluster string) (net.Conn, error)) *als.Manager {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := als.NewManager(als.Config{Dial: dial, Node: &corev3.Node{Id: "node-1"}, Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// service is the gRPC AccessLogService; receive gets the stream's context.
type service struct {
	alsv3.UnimplementedAccessLogServiceServer
	receive func(context.Context, *alsv3.StreamAccessLogsMessage)
}

func (s *service) StreamAccessLogs(st grpc.ClientStreamingServer[alsv3.StreamAccessLogsMessage, alsv3.StreamAccessLogsResponse]) error {
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		s.receive(st.Context(), m)
	}
}

// serve runs a gRPC server for the service on lis until the test ends.
func serve(t testing.TB, lis net.Listener, receive func(context.Context, *alsv3.StreamAccessLogsMessage)) {
	gs := grpc.NewServer()
	alsv3.RegisterAccessLogServiceServer(gs, &service{receive: receive})
	served := make(chan struct{})
	go func() { defer close(served); gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-served })
}
