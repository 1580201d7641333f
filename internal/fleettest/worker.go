package fleettest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// Worker is one worker process of a fleet: a bridge.Worker over an index it can lose,
// logging into a buffer of its own, and its queue consumer's Run in a goroutine. Build it
// with [NewWorker], give Logger and Bridge to the consumer, and [Worker.Start] the
// consumer's Run.
type Worker struct {
	ID     int
	Index  *MortalIndex   // the Bridge's index, as this process reaches it
	Bridge *bridge.Worker // what the consumer hands its items to
	Logs   *Buffer        // what Logger wrote, in slog's text format
	Logger *slog.Logger   // the Worker's, and the one to give the consumer
	// OnKill, when not nil, is called by Kill: to close what else the process holds, such
	// as its connection to the queue.
	OnKill func()

	cancel context.CancelFunc
	done   chan error
}

// NewWorker returns worker id, not yet started: a bridge.Worker over b with cfg, whose
// Index is b's behind a MortalIndex and whose Logger writes to Logs.
func NewWorker(t testing.TB, id int, b bridge.Bridge, cfg bridge.WorkerConfig) *Worker {
	t.Helper()
	w := &Worker{ID: id, Index: &MortalIndex{Index: b.Index}, Logs: &Buffer{}, done: make(chan error, 1)}
	w.Logger = slog.New(slog.NewTextHandler(w.Logs, nil))
	b.Index, cfg.Logger = w.Index, w.Logger
	var err error
	if w.Bridge, err = bridge.NewWorker(&b, cfg); err != nil {
		t.Fatal(err)
	}
	return w
}

// Start calls run — the consumer's Run — in a goroutine, under a context that Stop,
// Cancel and Kill end; Done receives what it returns.
func (w *Worker) Start(run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- run(ctx) }()
}

// Cancel ends Run's context, as a process's shutdown signal does, and returns at once.
func (w *Worker) Cancel() { w.cancel() }

// Done receives what Run returned, once.
func (w *Worker) Done() <-chan error { return w.done }

// Stop stops the worker cleanly: it ends Run's context, waits up to 30 s for Run to
// return nil, then stops the bridge.Worker within 10 s (nothing left to do for a consumer
// whose Run stops it). It fails t on an error or a hang.
func (w *Worker) Stop(t testing.TB) {
	t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker %d: Run = %v", w.ID, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("worker %d: Run did not return within 30 s of its context's end", w.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Bridge.Stop(ctx); err != nil {
		t.Errorf("worker %d: Stop = %v", w.ID, err)
	}
}

// Kill kills the worker as a SIGKILL would: from now on its index calls fail, OnKill
// closes what else it holds, and Run's context ends, so it writes, acknowledges and hands
// back nothing more.
func (w *Worker) Kill() {
	w.Index.Kill()
	if w.OnKill != nil {
		w.OnKill()
	}
	w.cancel()
}

// CheckLogs checks that no worker logged above Info.
func CheckLogs(t testing.TB, ws ...*Worker) {
	t.Helper()
	for _, w := range ws {
		if l := w.Logs.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("worker %d logged above Info:\n%s", w.ID, l)
		}
	}
}

// ErrDead is what a [MortalIndex] returns once killed.
var ErrDead = errors.New("fleettest: the worker process is dead")

// MortalIndex is an index as one worker process reaches it: once killed, every call that
// writes or checks a claim fails with ErrDead, as a killed process makes no more calls.
// It counts the claims it was asked to hand back while alive.
type MortalIndex struct {
	duework.Index
	dead      atomic.Bool
	unclaimed atomic.Int64
}

// Kill makes every later call that writes or checks a claim fail.
func (m *MortalIndex) Kill() { m.dead.Store(true) }

// Dead reports whether Kill was called.
func (m *MortalIndex) Dead() bool { return m.dead.Load() }

// Unclaimed returns how many claims Unclaim was asked to hand back while alive.
func (m *MortalIndex) Unclaimed() int64 { return m.unclaimed.Load() }

// StartClaims is the index's, or ErrDead once killed.
func (m *MortalIndex) StartClaims(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	if m.Dead() {
		return nil, ErrDead
	}
	return m.Index.StartClaims(ctx, cs)
}

// CompleteMany is the index's, or ErrDead once killed.
func (m *MortalIndex) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	if m.Dead() {
		return nil, ErrDead
	}
	return m.Index.CompleteMany(ctx, done)
}

// Unclaim is the index's, counted, or ErrDead once killed.
func (m *MortalIndex) Unclaim(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	if m.Dead() {
		return nil, ErrDead
	}
	m.unclaimed.Add(int64(len(cs)))
	return m.Index.Unclaim(ctx, cs)
}

// UnscheduleClaimed is the index's, or ErrDead once killed.
func (m *MortalIndex) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if m.Dead() {
		return ErrDead
	}
	return m.Index.UnscheduleClaimed(ctx, tc, c)
}

// Buffer is a bytes.Buffer safe for concurrent writes and reads: a log's destination
// that a test reads while the logger runs.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
