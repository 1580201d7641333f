package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// logBuffer holds the lines the Runner logged since the last take. Safe for concurrent
// use: the Runner logs from its workers' goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// take returns the lines logged since the last take, sorted: lines of one cycle come from
// several goroutines, in whatever order they ran.
func (l *logBuffer) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSuffix(l.buf.String(), "\n")
	l.buf.Reset()
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return lines
}

// filter passes on the records whose message keep names.
type filter struct{ slog.Handler }

func (f filter) Handle(ctx context.Context, r slog.Record) error {
	if !keep[r.Message] {
		return nil
	}
	return f.Handler.Handle(ctx, r)
}

func (f filter) WithAttrs(attrs []slog.Attr) slog.Handler { return filter{f.Handler.WithAttrs(attrs)} }
func (f filter) WithGroup(name string) slog.Handler       { return filter{f.Handler.WithGroup(name)} }

// keep are the Runner's lines this program prints: those an operator acts on about a
// source or a tenant. Each run that failed also logs "rota: item failed", and each cycle
// "rota: cycle"; the table shows those.
var keep = map[string]bool{"rota: tenant paused": true, "rota: source failing": true, "rota: source recovered": true}

// logger returns a logger that writes the lines kept, in slog's text form, to l, with
// times as clock shows them.
func (l *logBuffer) logger() *slog.Logger {
	text := slog.NewTextHandler(l, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		switch {
		case a.Key == slog.TimeKey && len(groups) == 0:
			return slog.Attr{} // the record's own time is the real clock's
		case a.Value.Kind() == slog.KindTime:
			return slog.String(a.Key, clock(a.Value.Time()))
		}
		return a
	}})
	return slog.New(filter{text})
}
