package lograte_test

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/rotaworks/rota/internal/lograte"
)

func Example() {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	l := lograte.New(logger, time.Minute, func() time.Time { return now })
	for range 3 {
		l.Log(context.Background(), "garbled", slog.LevelWarn, "rota: message dropped", slog.String("reason", "garbled"))
	}
	now = now.Add(time.Minute)
	l.Log(context.Background(), "garbled", slog.LevelWarn, "rota: message dropped", slog.String("reason", "garbled"))
	// Output:
	// level=WARN msg="rota: message dropped" reason=garbled
	// level=WARN msg="rota: message dropped" reason=garbled suppressed=2
}
