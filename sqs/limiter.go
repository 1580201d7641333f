package rotasqs

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// logEvery is the least time between two lines of one kind about one queue.
const logEvery = 10 * time.Second

// limiter writes at most one line per key every logEvery; the next line of a key counts
// those it left out since its last.
type limiter struct {
	logger *slog.Logger
	clock  Clock

	mu   sync.Mutex
	keys map[string]*logKey
}

type logKey struct {
	last    time.Time
	skipped int
	msg     string
	level   slog.Level
	attrs   []slog.Attr // of the last line left out
}

func newLimiter(logger *slog.Logger, clock Clock) *limiter {
	return &limiter{logger: logger, clock: clock, keys: map[string]*logKey{}}
}

// log writes a line of key, or counts it when one was written less than logEvery ago.
func (l *limiter) log(ctx context.Context, level slog.Level, key, msg string, attrs ...slog.Attr) {
	now := l.clock.Now()
	l.mu.Lock()
	k := l.keys[key]
	if k == nil {
		k = &logKey{}
		l.keys[key] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < logEvery {
		k.skipped++
		k.msg, k.level, k.attrs = msg, level, attrs
		l.mu.Unlock()
		return
	}
	skipped := k.skipped
	k.last, k.skipped = now, 0
	l.mu.Unlock()
	if skipped > 0 {
		attrs = append(attrs, slog.Int("not_logged", skipped))
	}
	l.logger.LogAttrs(context.WithoutCancel(ctx), level, msg, attrs...)
}

// flush writes, for each key with lines left out, its last one with their count.
func (l *limiter) flush(ctx context.Context) {
	l.mu.Lock()
	var lines []logKey
	for _, k := range l.keys {
		if k.skipped > 0 {
			lines = append(lines, *k)
			k.skipped = 0
		}
	}
	l.mu.Unlock()
	for _, k := range lines {
		l.logger.LogAttrs(ctx, k.level, k.msg, append(slices.Clip(k.attrs), slog.Int("not_logged", k.skipped-1))...)
	}
}
