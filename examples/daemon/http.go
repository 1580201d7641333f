package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/rotaworks/rota/inspect"
)

// serveInspector returns the run that serves the inspector's pages on cfg.httpAddr until
// ctx ends, then shuts the server down, giving requests under way 5 s before it closes
// their connections; without -http it returns nil at once. It fails when it cannot listen or the server stops by itself. The
// pages have no login: this binds where the flag says, and a service mounts the inspector
// behind its own authentication instead.
func serveInspector(cfg config, insp *inspect.Inspector, logger *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		if cfg.httpAddr == "" {
			return nil
		}
		ln, err := net.Listen("tcp", cfg.httpAddr)
		if err != nil {
			return fmt.Errorf("daemon: -http: %w", err)
		}
		srv := &http.Server{Handler: insp, ReadHeaderTimeout: 10 * time.Second}
		url := "http://" + ln.Addr().String() + "/"
		logger.Info("daemon: inspector", "url", url, "actions", cfg.actions)
		if cfg.served != nil {
			cfg.served <- url
		}
		stopped := make(chan error, 1)
		go func() { stopped <- srv.Serve(ln) }()
		select {
		case err := <-stopped:
			return fmt.Errorf("daemon: inspector: %w", err)
		case <-ctx.Done():
		}
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			logger.Warn("daemon: inspector: connections still open at the stop are closed", "error", err)
			return srv.Close()
		}
		return nil
	}
}
