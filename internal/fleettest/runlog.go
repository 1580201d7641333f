package fleettest

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// Run is one run of a source's pipeline, as a [RunLog] recorded it.
type Run struct {
	Key        duework.Key
	Runner     int // the worker or replica whose pipeline ran it
	Start, End time.Time
	Killed     bool // the runner died under it: its completion was never written
}

// Hold is called while a run is under way, with the run's context and source; it reports
// whether the runner died under the run. A run that died returns an error from the
// pipeline and is recorded Killed.
type Hold func(ctx context.Context, k duework.Key) (killed bool)

// RunLog records every run of the pipelines it hands out: which runner, which source,
// when it started and ended. It fails the test at once when a run starts while another
// run of the same source is under way. It is safe for concurrent use.
type RunLog struct {
	t      testing.TB
	runner string
	mu     sync.Mutex
	runs   []Run
	active map[duework.Key]int  // the runner running each source now
	ran    map[duework.Key]bool // the sources with a run that was not killed
	wait   []ranWaiter
}

// ranWaiter is a channel to close once n sources have run.
type ranWaiter struct {
	n  int
	ch chan struct{}
}

// NewRunLog returns an empty log reporting to t, whose messages call each runner by
// runner and its number: "worker 2", "replica 0".
func NewRunLog(t testing.TB, runner string) *RunLog {
	return &RunLog{t: t, runner: runner, active: map[duework.Key]int{}, ran: map[duework.Key]bool{}}
}

// Pipeline returns runner's pipeline: it records each run and finds nothing new, so that
// every written run is a miss that advances the source's streak by one. hold, when not
// nil, is called while the run is under way.
func (l *RunLog) Pipeline(runner int, hold Hold) bridge.Pipeline {
	return bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		k := duework.Key{UserID: tc.UserID(), WorkKey: e.Slug}
		start := time.Now()
		l.mu.Lock()
		if other, ok := l.active[k]; ok {
			l.t.Errorf("%s/%s: %s %d started it while %s %d was running it", k.UserID, k.WorkKey, l.runner, runner, l.runner, other)
		}
		l.active[k] = runner
		l.mu.Unlock()
		killed := hold != nil && hold(ctx, k)
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.active, k)
		l.runs = append(l.runs, Run{Key: k, Runner: runner, Start: start, End: time.Now(), Killed: killed})
		if killed {
			return bridge.Result{}, errors.New("killed")
		}
		l.noteRan(k)
		return bridge.Result{}, nil
	})
}

// noteRan counts k among the sources that ran and closes the channels of Ran it
// satisfies. l.mu must be held.
func (l *RunLog) noteRan(k duework.Key) {
	if l.ran[k] {
		return
	}
	l.ran[k] = true
	l.wait = slices.DeleteFunc(l.wait, func(w ranWaiter) bool {
		if len(l.ran) < w.n {
			return false
		}
		close(w.ch)
		return true
	})
}

// Ran returns a channel closed once n sources have each had a run that was not killed.
func (l *RunLog) Ran(n int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	if len(l.ran) >= n {
		close(ch)
	} else {
		l.wait = append(l.wait, ranWaiter{n: n, ch: ch})
	}
	return ch
}

// All returns the runs recorded so far, in the order they ended.
func (l *RunLog) All() []Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

// Written counts each source's runs whose completion was written: those not killed.
func (l *RunLog) Written() map[duework.Key]int {
	n := map[duework.Key]int{}
	for _, r := range l.All() {
		if !r.Killed {
			n[r.Key]++
		}
	}
	return n
}

// RanSince reports how many of sources have a run, not killed, that started at or after
// since.
func (l *RunLog) RanSince(sources map[duework.Key]bool, since time.Time) (ran, of int) {
	seen := map[duework.Key]bool{}
	for _, r := range l.All() {
		if !r.Start.Before(since) && !r.Killed {
			seen[r.Key] = true
		}
	}
	for k := range sources {
		if seen[k] {
			ran++
		}
	}
	return ran, len(sources)
}

// CheckEachRanAlone checks the runs recorded so far: each of sources ran, and no run of
// one started before the one before it ended.
func (l *RunLog) CheckEachRanAlone(sources map[duework.Key]bool) {
	l.t.Helper()
	perSource := map[duework.Key][]Run{}
	for _, r := range l.All() {
		perSource[r.Key] = append(perSource[r.Key], r)
	}
	for _, k := range sortedKeys(sources) {
		rs := perSource[k]
		if len(rs) == 0 {
			l.t.Errorf("%s/%s never ran", k.UserID, k.WorkKey)
		}
		slices.SortFunc(rs, func(x, y Run) int { return x.Start.Compare(y.Start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].Start.Before(rs[i-1].End) {
				l.t.Errorf("%s/%s: a run by %s %d started before the run by %s %d ended",
					k.UserID, k.WorkKey, l.runner, rs[i].Runner, l.runner, rs[i-1].Runner)
			}
		}
	}
}

// Killed counts the runs that were killed.
func Killed(runs []Run) int {
	n := 0
	for _, r := range runs {
		if r.Killed {
			n++
		}
	}
	return n
}

// Jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are equal and 1/n when
// one has everything; 0 when all are 0.
func Jain(xs []int) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// sortedKeys returns the keys of set by user, then work key.
func sortedKeys(set map[duework.Key]bool) []duework.Key {
	return slices.SortedFunc(maps.Keys(set), func(a, b duework.Key) int {
		return cmp.Or(cmp.Compare(a.UserID, b.UserID), cmp.Compare(a.WorkKey, b.WorkKey))
	})
}
