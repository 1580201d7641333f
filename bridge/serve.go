package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Serve returns a run for [RunAll] that serves srv — the operator's page (package
// inspect), metrics, health checks — on ln, or on srv.Addr when ln is nil, until its
// context ends, and then shuts srv down: it stops accepting, and waits for the requests
// in flight for at most DefaultShutdownTimeout before it closes what is left. It returns
// nil after such a stop, and an error when srv cannot listen or fails on its own, which
// makes RunAll stop the service's other loops.
//
//	err := bridge.RunAll(ctx, runner.Run, scheduler.Run, bridge.Serve(&http.Server{Addr: ":8080", Handler: insp}, nil))
func Serve(srv *http.Server, ln net.Listener) func(context.Context) error {
	return func(ctx context.Context) error {
		if srv == nil {
			return errors.New("bridge: Serve: the server must not be nil")
		}
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", srv.Addr); err != nil {
				return fmt.Errorf("bridge: Serve: %w", err)
			}
		}
		stopped := make(chan error, 1)
		go func() { stopped <- srv.Serve(ln) }()
		select {
		case err := <-stopped:
			return fmt.Errorf("bridge: Serve %s: %w", ln.Addr(), err)
		case <-ctx.Done():
		}
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			_ = srv.Close() // cut the requests still running past the timeout
		}
		return nil
	}
}
