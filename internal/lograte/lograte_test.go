package lograte_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/lograte"
)

func TestLimiterLogsOneLinePerIntervalAndKind(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := lograte.New(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second, func() time.Time { return now })
	ctx := context.Background()
	logged := []bool{
		l.Log(ctx, "forged", slog.LevelWarn, "dropped"),
		l.Log(ctx, "forged", slog.LevelWarn, "dropped"),
		l.Log(ctx, "garbled", slog.LevelWarn, "dropped"), // another kind: its own budget
		l.Log(ctx, "forged", slog.LevelWarn, "dropped"),
	}
	now = now.Add(10 * time.Second)
	logged = append(logged, l.Log(ctx, "forged", slog.LevelWarn, "dropped"))
	if want := []bool{true, false, true, false, true}; !equal(logged, want) {
		t.Fatalf("logged %v, want %v", logged, want)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || strings.Contains(lines[0], "suppressed") || !strings.Contains(lines[2], "suppressed=2") {
		t.Fatalf("lines:\n%s\nwant three, the last counting the two held back", buf.String())
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
