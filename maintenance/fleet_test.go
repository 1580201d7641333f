package maintenance_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// scriptedStore fails the Updates its fail function picks: before they reach the store,
// or (after) once they took effect.
type scriptedStore struct {
	*maintenance.MemoryStateStore
	mu      sync.Mutex
	updates int
	fail    func(n int, names []string) (fail, after bool)
}

func (s *scriptedStore) Update(ctx context.Context, names []string, f maintenance.UpdateFunc) error {
	s.mu.Lock()
	s.updates++
	fail, after := false, false
	if s.fail != nil {
		fail, after = s.fail(s.updates, names)
	}
	s.mu.Unlock()
	if fail && !after {
		return errDisk
	}
	if err := s.MemoryStateStore.Update(ctx, names, f); err != nil || !fail {
		return err
	}
	return errDisk
}

// Two schedulers run the same registry over one store: an off-lease task that runs six
// times longer than LeaseTTL stays claimed by the one running it — Run extends its claim —
// so the other never starts it beside it, and starts it only once it is due again.
func TestRunKeepsAnOffLeaseClaimWhileItRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var runs []string
		active := 0
		task := func(holder string) maintenance.Task {
			sync := offLease("sync", time.Hour)
			sync.Run = func(ctx context.Context) error {
				mu.Lock()
				runs = append(runs, holder)
				active++
				if active > 1 {
					t.Errorf("sync runs on two schedulers at once (%v)", runs)
				}
				mu.Unlock()
				time.Sleep(30 * time.Minute)
				mu.Lock()
				active--
				mu.Unlock()
				return nil
			}
			return sync
		}
		store := maintenance.NewMemoryStateStore()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, holder := range []string{"a", "b"} {
			s := newSched(t, []maintenance.Task{task(holder)}, maintenance.Config{
				StateStore: store, Holder: holder, LeaseTTL: 5 * time.Minute, PollInterval: time.Minute})
			wg.Go(func() { _ = s.Run(ctx) })
			time.Sleep(time.Second) // a starts first
		}
		time.Sleep(85 * time.Minute)
		cancel()
		wg.Wait()
		if len(runs) != 2 {
			t.Errorf("rule: in 85 minutes a task of hourly cadence running 30 minutes starts twice, once per hour: %v", runs)
		}
	})
}

// A claim that cannot be extended lapses, and the task's context is cancelled when it
// does (the cause wraps ErrNotHolder): the task runs exactly as long as its claim covers
// it, and another scheduler may then start it.
func TestRunCancelsATaskWhoseClaimLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cut := make(chan time.Time, 1)
		var cause error
		long := offLease("sync", time.Hour)
		long.Run = func(ctx context.Context) error {
			<-ctx.Done()
			cause = context.Cause(ctx)
			cut <- time.Now()
			return cause
		}
		store := &scriptedStore{MemoryStateStore: maintenance.NewMemoryStateStore()}
		store.fail = func(n int, _ []string) (bool, bool) { return n > 1, false } // the claim, then nothing
		s := newSched(t, []maintenance.Task{long}, maintenance.Config{StateStore: store, LeaseTTL: 6 * time.Minute, PollInterval: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		at := <-cut
		if !at.Equal(start.Add(6*time.Minute)) || !errors.Is(cause, maintenance.ErrNotHolder) {
			t.Errorf("rule: a task whose claim lapses unextended is cancelled at the lapse, cause ErrNotHolder: at %v, %v", at.Sub(start), cause)
		}
		other := newSched(t, []maintenance.Task{offLease("sync", time.Hour)}, maintenance.Config{StateStore: store.MemoryStateStore, Holder: "other"})
		if res := poll(t, other, at); winnerName(res) != "sync" {
			t.Errorf("another scheduler starts the task once its claim lapsed: %+v", res.Winner)
		}
		cancel()
		<-done
	})
}

// A claim whose write failed after it took effect is no claim the scheduler holds: its
// next poll does not count it as running and clears it, so the task starts one poll
// later, not a LeaseTTL later.
func TestOrphanedClaimIsClearedByTheNextPoll(t *testing.T) {
	store := &scriptedStore{MemoryStateStore: maintenance.NewMemoryStateStore()}
	store.fail = func(n int, _ []string) (bool, bool) { return n == 1, true }
	s := newSched(t, []maintenance.Task{offLease("sync", time.Hour)}, maintenance.Config{StateStore: store, LeaseTTL: time.Hour})
	if res, err := s.Poll(bg, t0); !errors.Is(err, errDisk) || res.Winner != nil {
		t.Fatalf("the failed write dispatches nothing: %+v, %v", res.Winner, err)
	}
	if st := stateOf(t, store, "sync"); !st.Running {
		t.Fatalf("the write took effect all the same: %+v", st)
	}
	if res := poll(t, s, t0.Add(time.Minute)); winnerName(res) != "sync" {
		t.Fatalf("rule: the next poll starts the task its failed write left claimed: %+v", res.Winner)
	}
	if st := stateOf(t, store, "sync"); !st.Running || !st.RunningSince.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the task runs as the new run: %+v", st)
	}
}

// A host that drives its own loop keeps an off-lease claim with Renew; without it the
// claim lapses after LeaseTTL and another scheduler starts the task.
func TestRenewKeepsOffLeaseClaims(t *testing.T) {
	store := maintenance.NewMemoryStateStore()
	cfg := func(holder string) maintenance.Config {
		return maintenance.Config{StateStore: store, Holder: holder, LeaseTTL: 5 * time.Minute}
	}
	tasks := []maintenance.Task{offLease("kept", day), offLease("left", day)}
	a, b := newSched(t, tasks, cfg("a")), newSched(t, tasks, cfg("b"))
	if res := poll(t, a, t0); len(res.Dispatched()) != 2 {
		t.Fatalf("a starts both: %v", names(res.Dispatched()))
	}
	if err := a.Renew(bg, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(bg, "left", errors.New("left for the test"), t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := store.Save(bg, 0, maintenance.TaskState{Name: "left", Class: maintenance.OffLease}); err != nil {
		t.Fatal(err) // forget the outcome: left is due again, as if its run were still on
	}
	if res := poll(t, b, t0.Add(7*time.Minute)); !slicesEqual(names(res.Dispatched()), []string{"left"}) {
		t.Fatalf("rule: at 7m b starts only what a's claims do not cover, kept being renewed to 8m: %v", names(res.Dispatched()))
	}
	if err := a.Renew(bg, t0.Add(9*time.Minute)); !errors.Is(err, maintenance.ErrNotHolder) {
		t.Fatalf("rule: Renew after the claim lapsed is ErrNotHolder: %v", err)
	}
}

func slicesEqual(a, b []string) bool {
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

// Complete whose write failed after it took effect keeps the run, and a second Complete
// succeeds without recording it twice; a new Scheduler with the same Holder — a restart —
// completes a run the old one left.
func TestCompleteRetriedAndAfterRestart(t *testing.T) {
	store := &scriptedStore{MemoryStateStore: maintenance.NewMemoryStateStore()}
	lease := maintenance.NewMemoryLease(time.Hour)
	store.FenceWith(lease)
	tasks := []maintenance.Task{heavy("reindex", day), offLease("verify", day)}
	s := newSched(t, tasks, maintenance.Config{StateStore: store, Lease: lease, MaxHold: time.Hour})
	poll(t, s, t0)
	store.fail = func(int, []string) (bool, bool) { return true, true }
	if err := s.Complete(bg, "reindex", nil, t0.Add(time.Minute)); !errors.Is(err, errDisk) {
		t.Fatalf("Complete whose write failed = %v", err)
	}
	if _, held, _ := lease.Current(bg, t0.Add(time.Minute)); !held {
		t.Fatal("rule: a Complete that may be retried keeps the grant")
	}
	store.fail = nil
	if err := s.Complete(bg, "reindex", nil, t0.Add(2*time.Minute)); err != nil {
		t.Fatalf("rule: Complete repeated after its write took effect succeeds: %v", err)
	}
	if st := stateOf(t, store, "reindex"); st.Running || !st.LastRunAt.Equal(t0) || st.LastOutcome != maintenance.OutcomeSucceeded {
		t.Fatalf("the run is recorded once: %+v", st)
	}
	if _, held, _ := lease.Current(bg, t0.Add(2*time.Minute)); held {
		t.Fatal("the grant is released once the outcome is recorded")
	}
	restarted := newSched(t, tasks, maintenance.Config{StateStore: store, Lease: lease, MaxHold: time.Hour})
	if err := restarted.Complete(bg, "verify", errors.New("lost"), t0.Add(3*time.Minute)); err != nil {
		t.Fatalf("rule: a restarted scheduler completes its predecessor's run: %v", err)
	}
	if st := stateOf(t, store, "verify"); st.Running || st.LastOutcome != maintenance.OutcomeFailed {
		t.Fatalf("the predecessor's run is recorded: %+v", st)
	}
	if err := restarted.Complete(bg, "verify", nil, t0.Add(4*time.Minute)); !errors.Is(err, maintenance.ErrNotHolder) {
		t.Fatalf("Complete of a task that runs nowhere is ErrNotHolder: %v", err)
	}
}

// A poll that Run's end cuts short starts nothing: the claims it took are cleared and a
// grant it took released, so the rest of the fleet need not wait for them to lapse.
func TestRunDropsAPollItsEndCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		store := &scriptedStore{MemoryStateStore: maintenance.NewMemoryStateStore()}
		lease := maintenance.NewMemoryLease(time.Hour)
		store.FenceWith(lease)
		store.fail = func(n int, _ []string) (bool, bool) {
			if n == 2 { // the second pass's write: Run's end comes while it is on the way
				cancel()
			}
			return false, false
		}
		ran := false
		h, o := heavy("reindex", day), offLease("verify", day)
		h.Run = func(context.Context) error { ran = true; return nil }
		o.Run = h.Run
		s := newSched(t, []maintenance.Task{h, o}, maintenance.Config{StateStore: store, Lease: lease, MaxHold: time.Hour})
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if ran {
			t.Error("rule: a poll cut short by Run's end starts nothing")
		}
		for _, name := range []string{"reindex", "verify"} {
			if st := stateOf(t, store, name); st.Running {
				t.Errorf("rule: the cut poll's claim of %s is cleared: %+v", name, st)
			}
		}
		if _, held, _ := lease.Current(bg, time.Now()); held {
			t.Error("rule: the cut poll's grant is released")
		}
	})
}
