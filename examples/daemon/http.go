package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/inspect"
)

// serveInspector returns the run that serves the inspector's pages on cfg.httpAddr until
// ctx ends (bridge.Serve), or nil when the daemon serves none. The pages have no login:
// this binds where the flag says, and a service mounts the inspector behind its own
// authentication instead.
func serveInspector(cfg config, insp *inspect.Inspector, logger *slog.Logger) (func(context.Context) error, error) {
	if cfg.httpAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return nil, fmt.Errorf("daemon: -http: %w", err)
	}
	url := "http://" + ln.Addr().String() + "/"
	logger.Info("daemon: inspector", "url", url, "actions", cfg.actions)
	if cfg.served != nil {
		cfg.served <- url
	}
	return bridge.Serve(&http.Server{Handler: insp, ReadHeaderTimeout: 10 * time.Second}, ln), nil
}
