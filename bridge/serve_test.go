package bridge_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/rotaworks/rota/bridge"
)

// TestServeStopsCleanlyUnderRunAll: a server run by Serve answers until RunAll's context
// ends, and then stops with the other runs, RunAll returning nil.
func TestServeStopsCleanlyUnderRunAll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bridge.RunAll(ctx, bridge.Serve(srv, ln)) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("served %q, want ok", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunAll = %v, want nil after a clean stop", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
		t.Fatal("the server still answers after the stop")
	}
}

// TestServeFailsWhenItCannotListen: an address it cannot listen on is a failure, which
// stops RunAll's other runs.
func TestServeFailsWhenItCannotListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other := func(ctx context.Context) error { <-ctx.Done(); return nil }
	err = bridge.RunAll(context.Background(), other, bridge.Serve(&http.Server{Addr: ln.Addr().String()}, nil))
	var opErr *net.OpError
	if err == nil || !errors.As(err, &opErr) {
		t.Fatalf("RunAll = %v, want the listen error", err)
	}
}
