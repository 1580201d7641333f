package fleettest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// Fleet is one dispatcher feeding a queue through a Sink and the worker processes
// consuming it, over one [Store], their runs recorded in one [RunLog].
type Fleet struct {
	Store   *Store
	Runs    *RunLog      // the workers' runs; give Runs.Pipeline to each worker's Bridge
	Sink    *WatchedSink // the dispatcher's Sink
	Workers []*Worker    // the live workers, which StopWorkers stops
	FeedLog Buffer       // what the Feeder logged, in slog's text format
	// StartWorker starts the adapter's worker id, its pipeline Runs.Pipeline(id, hold).
	// The adapter's tests set it.
	StartWorker func(id int, hold Hold) *Worker

	t      testing.TB
	cancel context.CancelFunc
	fed    sync.WaitGroup
}

// NewFleet returns a fleet over s whose dispatcher will feed sink, with no worker yet.
func NewFleet(t testing.TB, s *Store, sink bridge.Sink) *Fleet {
	return &Fleet{Store: s, Runs: NewRunLog(t, "worker"), Sink: &WatchedSink{Sink: sink}, t: t}
}

// StartFeeding starts the dispatcher: a Feeder of d into the Sink every interval,
// logging to FeedLog.
func (f *Fleet) StartFeeding(d *dispatch.Dispatcher, interval time.Duration) {
	f.t.Helper()
	feeder, err := bridge.NewFeeder(d, f.Sink, bridge.FeederConfig{Interval: interval, Logger: slog.New(slog.NewTextHandler(&f.FeedLog, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.fed.Go(func() {
		if err := feeder.Run(ctx); err != nil {
			f.t.Errorf("Feeder.Run = %v", err)
		}
	})
}

// StopFeeding stops the dispatcher and waits for it.
func (f *Fleet) StopFeeding() {
	f.cancel()
	f.fed.Wait()
}

// AddWorkers starts n workers numbered from first, with no hold, adds them to Workers and
// returns Workers.
func (f *Fleet) AddWorkers(first, n int) []*Worker {
	for id := first; id < first+n; id++ {
		f.Workers = append(f.Workers, f.StartWorker(id, nil))
	}
	return f.Workers
}

// StopWorkers stops every live worker cleanly, side by side.
func (f *Fleet) StopWorkers() {
	f.t.Helper()
	var wg sync.WaitGroup
	for _, w := range f.Workers {
		wg.Go(func() { w.Stop(f.t) })
	}
	wg.Wait()
	f.Workers = nil
}

// WaitRanSince waits until every source of the Store has run since since, failing the
// test after bound.
func (f *Fleet) WaitRanSince(since time.Time, bound time.Duration) {
	f.t.Helper()
	var ran, of int
	if !poll(bound, func() bool {
		ran, of = f.Runs.RanSince(f.Store.Sources, since)
		return ran == of
	}) {
		f.t.Fatalf("after %v: %d of %d sources had run since %s", bound, ran, of, since.Format(time.StampMilli))
	}
}

// A Sample reads what the queue holds: the messages of each lane, and a description of
// anything else wrong with it (an entry queued twice).
type Sample func(ctx context.Context) (perLane map[dispatch.Lane]int, wrong []string, err error)

// WatchQueue samples the queue every 50 ms until ctx ends. The returned function waits for
// that end and reports each time a lane held more than capacity messages or the sample
// found something wrong, and how many samples were read (a failed one is not counted).
func (f *Fleet) WatchQueue(ctx context.Context, capacity int, sample Sample) (wait func() (problems []string, samples int)) {
	var problems []string
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if perLane, wrong, err := sample(ctx); err == nil {
				samples++
				for lane, n := range perLane {
					if n > capacity {
						problems = append(problems, fmt.Sprintf("lane %q held %d messages, more than its capacity %d", lane, n, capacity))
					}
				}
				problems = append(problems, wrong...)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() ([]string, int) {
		<-done
		return problems, samples
	}
}

// CheckRuns checks what the fleet did, once it has stopped cleanly, and returns its runs:
// each source ran, no two runs of one overlapped, nothing was lost
// ([Store.CheckNothingLost] over the written runs), and no lane was ever sent more than
// the room the Sink reported.
func (f *Fleet) CheckRuns() []Run {
	f.t.Helper()
	f.Runs.CheckEachRanAlone(f.Store.Sources)
	f.Store.CheckNothingLost(f.Runs.Written())
	if over := f.Sink.OverSent(); len(over) > 0 {
		f.t.Errorf("lanes sent more than their room: %v", over)
	}
	return f.Runs.All()
}

// CheckShares checks how workers workers (numbered from 0) shared runs: each did at least
// a sixth of them, and the tenants other than noisy were served alike (Jain's index over
// their run counts ≥ 0.9). It returns the runs per worker and per tenant, and that index.
func CheckShares(t testing.TB, runs []Run, workers int, noisy string) (perWorker []int, perTenant map[string]int, quietJain float64) {
	t.Helper()
	perWorker, perTenant = make([]int, workers), map[string]int{}
	for _, r := range runs {
		perWorker[r.Runner]++
		perTenant[r.Key.UserID]++
	}
	var quiet []int
	for user, n := range perTenant {
		if user != noisy {
			quiet = append(quiet, n)
		}
	}
	for i, n := range perWorker {
		if 6*n < len(runs) {
			t.Errorf("worker %d did %d of %d runs, less than a sixth", i, n, len(runs))
		}
	}
	if quietJain = Jain(quiet); quietJain < 0.9 {
		t.Errorf("Jain's index over the quiet tenants' runs = %.3f, want ≥ 0.9; runs per tenant %v", quietJain, perTenant)
	}
	return perWorker, perTenant, quietJain
}

// WatchedSink is a Sink that records, per lane, what was sent since the last Room, and
// each time a lane was sent more than that Room allowed: a check that the queue stayed
// within the room reported.
type WatchedSink struct {
	bridge.Sink
	mu       sync.Mutex
	last     dispatch.Take
	since    map[dispatch.Lane]int
	sent     int
	overSent []string
}

// Room is the Sink's, remembered.
func (w *WatchedSink) Room(ctx context.Context) (dispatch.Take, error) {
	take, err := w.Sink.Room(ctx)
	w.mu.Lock()
	w.last, w.since = take, map[dispatch.Lane]int{}
	w.mu.Unlock()
	return take, err
}

// Send is the Sink's, counted against the last Room.
func (w *WatchedSink) Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	w.mu.Lock()
	if w.since == nil {
		w.since = map[dispatch.Lane]int{}
	}
	w.since[lane] += len(items)
	w.sent += len(items)
	if w.since[lane] > w.last.PerLane[lane] {
		w.overSent = append(w.overSent, fmt.Sprintf("%s: %d sent, room %d", lane, w.since[lane], w.last.PerLane[lane]))
	}
	w.mu.Unlock()
	return w.Sink.Send(ctx, lane, items)
}

// SentInAll returns how many items were sent in all.
func (w *WatchedSink) SentInAll() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent
}

// OverSent describes each Send that took a lane past the room last reported.
func (w *WatchedSink) OverSent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.overSent...)
}

// Victim is the [Hold] of a worker to be killed mid-run: its runs go through until
// KillMidRun arms it; from then each run waits for the kill, and is recorded killed.
type Victim struct {
	t                  testing.TB
	arm, kill, blocked chan struct{}
}

// NewVictim returns a Victim, not armed.
func NewVictim(t testing.TB) *Victim {
	return &Victim{t: t, arm: make(chan struct{}), kill: make(chan struct{}), blocked: make(chan struct{}, 100)}
}

// Hold is the victim's hold: pass it to the victim's pipeline. A run that reaches its
// context's end before the kill fails the test: the kill came too late.
func (v *Victim) Hold(ctx context.Context, _ duework.Key) bool {
	select {
	case <-v.arm:
	default:
		return false
	}
	v.blocked <- struct{}{}
	select {
	case <-v.kill:
	case <-ctx.Done():
		v.t.Errorf("a run of the killed worker reached its claim margin before the kill")
	}
	return true
}

// KillMidRun kills w, whose pipeline's hold is the victim's, in the middle of a run: it
// arms the victim, waits up to 10 s for a run to start and 100 ms more, kills w, and
// then lets the waiting runs end, killed. Call it once.
func (v *Victim) KillMidRun(w *Worker) {
	v.t.Helper()
	close(v.arm)
	select {
	case <-v.blocked:
	case <-time.After(10 * time.Second):
		v.t.Fatal("the victim started no run in 10 s")
	}
	time.Sleep(100 * time.Millisecond)
	w.Kill()
	close(v.kill)
}

// WaitFor polls cond every 20 ms until it holds, failing t after bound with what.
func WaitFor(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(bound, cond) {
		t.Fatalf("after %v: %s", bound, what)
	}
}

// poll polls cond every 20 ms until it holds, and reports whether it did within bound.
func poll(bound time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(bound); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
