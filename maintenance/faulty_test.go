package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

var errFlaky = errors.New("flaky store: write failed")

// flakyWrites is a StateStore whose every n-th write fails: the odd failures before the
// write reaches the store, the even ones after it took effect (a timeout on the way back).
type flakyWrites struct {
	maintenance.StateStore
	n int

	mu     sync.Mutex
	writes int
	failed int
}

// fail reports whether this write fails, and whether it fails after taking effect.
func (f *flakyWrites) fail() (fail, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.writes%f.n != 0 {
		return false, false
	}
	f.failed++
	return true, f.failed%2 == 0
}

func (f *flakyWrites) Save(ctx context.Context, token uint64, states ...maintenance.TaskState) error {
	fail, after := f.fail()
	if fail && !after {
		return errFlaky
	}
	if err := f.StateStore.Save(ctx, token, states...); err != nil || !fail {
		return err
	}
	return errFlaky
}

func (f *flakyWrites) Update(ctx context.Context, names []string, fn maintenance.UpdateFunc) error {
	fail, after := f.fail()
	if fail && !after {
		return errFlaky
	}
	if err := f.StateStore.Update(ctx, names, fn); err != nil || !fail {
		return err
	}
	return errFlaky
}

// taskRuns records the runs of a simulated registry and checks that none is stuck.
type taskRuns struct {
	mu   sync.Mutex
	runs map[string][][2]time.Time // start, end; end zero while it runs
}

func (r *taskRuns) task(t maintenance.Task, d time.Duration) maintenance.Task {
	t.Run = func(ctx context.Context) error {
		r.mu.Lock()
		r.runs[t.Name] = append(r.runs[t.Name], [2]time.Time{time.Now()})
		i := len(r.runs[t.Name]) - 1
		r.mu.Unlock()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.runs[t.Name][i][1] = time.Now()
		r.mu.Unlock()
		return ctx.Err()
	}
	return t
}

// stuck returns, for each task, every wait from the instant it was due again (its
// previous start plus its cadence, or the previous end if later) to its next start, or
// to end, that exceeds bound.
func (r *taskRuns) stuck(tasks []maintenance.Task, start, end time.Time, bound func(maintenance.Task) time.Duration) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, t := range tasks {
		due := start
		for _, run := range append(slices.Clone(r.runs[t.Name]), [2]time.Time{end, end}) {
			if w := run[0].Sub(due); w > bound(t) {
				out = append(out, fmt.Sprintf("%s waited %v from %v (bound %v)", t.Name, w, due.Sub(start), bound(t)))
			}
			if run[1].IsZero() {
				break // still running at the end
			}
			due = run[0].Add(t.Cadence)
			if run[1].After(due) {
				due = run[1]
			}
		}
	}
	return out
}

// A StateStore that fails one write in n — some before they take effect, some after —
// leaves no task stuck beyond its bound: Run retries the write of an outcome, and a
// running flag whose write could not be made lapses on its own within one LeaseTTL of
// the run's end, so the task is runnable again soon after, never for MaxHold.
func TestFailedWritesLeaveNoTaskStuck(t *testing.T) {
	for _, n := range []int{3, 5, 8} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const poll, ttl, maxHold = time.Minute, 5 * time.Minute, 2 * time.Hour
				rec := &taskRuns{runs: map[string][][2]time.Time{}}
				compact := offLease("compact", 10*time.Minute)
				rollup := offLease("rollup", 7*time.Minute)
				rollup.DependsOn = []string{"compact"}
				tasks := []maintenance.Task{
					rec.task(heavy("reindex", 30*time.Minute), 4*time.Minute),
					rec.task(heavy("analyze", 20*time.Minute), 3*time.Minute),
					rec.task(offLease("vacuum", 5*time.Minute), 30*time.Second),
					rec.task(compact, 2*time.Minute),
					rec.task(rollup, time.Minute),
				}
				store := &flakyWrites{StateStore: maintenance.NewMemoryStateStore(), n: n}
				s := newSched(t, tasks, maintenance.Config{StateStore: store, PollInterval: poll, LeaseTTL: ttl, MaxHold: maxHold})
				ctx, cancel := context.WithCancel(context.Background())
				start := time.Now()
				done := make(chan error)
				go func() { done <- s.Run(ctx) }()
				time.Sleep(12 * time.Hour)
				synctest.Wait()
				end := time.Now()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				// A flag left by a write that could not be made lapses within one LeaseTTL;
				// the next poll starts the task. A task may also wait for another heavy one,
				// or for its dependency, to end (a run of at most 4 minutes).
				bound := func(maintenance.Task) time.Duration { return ttl + 2*poll + 4*time.Minute }
				if stuck := rec.stuck(tasks, start, end, bound); len(stuck) > 0 {
					t.Errorf("with one write in %d failing (%d of %d writes), tasks were stuck:\n%s",
						n, store.failed, store.writes, strings.Join(stuck, "\n"))
				}
				if store.failed == 0 {
					t.Fatal("no write failed")
				}
			})
		})
	}
}
