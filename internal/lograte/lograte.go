// Package lograte keeps a log line that can repeat without bound — a forged message, a
// garbled one, a stale redelivery — to one line per interval and kind, counting the
// lines it held back. The bridge's Worker and the queue adapters (rotanats, rotasqs) share
// it, so a flood of bad messages costs a log a line every few seconds, not one per
// message.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter logs at most one line per Every for each kind, through Logger. The zero
// Limiter is not usable; build one with New. A Limiter is safe for concurrent use.
type Limiter struct {
	logger *slog.Logger
	every  time.Duration
	now    func() time.Time

	mu    sync.Mutex
	kinds map[string]*kind
}

type kind struct {
	last       time.Time
	suppressed int
}

// New returns a Limiter that logs through logger at most one line per every for each
// kind, reading the time from now (the real clock when nil).
func New(logger *slog.Logger, every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{logger: logger, every: every, now: now, kinds: map[string]*kind{}}
}

// Log logs msg at level with attrs unless a line of the same kind was logged less than
// Every ago; then it only counts it. A line that follows held-back ones carries their
// number as "suppressed". It reports whether it logged.
func (l *Limiter) Log(ctx context.Context, kindName string, level slog.Level, msg string, attrs ...slog.Attr) bool {
	now := l.now()
	l.mu.Lock()
	k := l.kinds[kindName]
	if k == nil {
		k = &kind{}
		l.kinds[kindName] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < l.every {
		k.suppressed++
		l.mu.Unlock()
		return false
	}
	n := k.suppressed
	k.last, k.suppressed = now, 0
	l.mu.Unlock()
	if n > 0 {
		attrs = append(attrs, slog.Int("suppressed", n))
	}
	l.logger.LogAttrs(ctx, level, msg, attrs...)
	return true
}
