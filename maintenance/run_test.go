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

// TestRunRenewsAndCancelsAtMaxHold: Run renews the lease in the background while a heavy
// task runs (past several TTLs), cancels the task's context at MaxHold, records the
// outcome as cancelled and releases the lease.
func TestRunRenewsAndCancelsAtMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var cancelledAt time.Time
		stuck := heavy("summary", day)
		stuck.Run = func(ctx context.Context) error {
			<-ctx.Done()
			cancelledAt = time.Now()
			return ctx.Err()
		}
		store := maintenance.NewMemoryStateStore()
		lease := maintenance.NewMemoryLease(time.Hour)
		s := newSched(t, []maintenance.Task{stuck}, maintenance.Config{
			StateStore: store, Lease: lease, MaxHold: time.Hour, LeaseTTL: 3 * time.Minute, PollInterval: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()

		time.Sleep(30 * time.Minute)
		synctest.Wait()
		g, held, _ := lease.Current(bg, time.Now())
		if !held || g.Holder != maintenance.DefaultHolder || !g.AcquiredAt.Equal(start) {
			t.Fatalf("rule: Run renews the lease while the heavy task runs: after 10 TTLs Current = %+v, %v", g, held)
		}
		if !stateOf(t, store, "summary").Running {
			t.Fatal("the running task is recorded as running")
		}

		time.Sleep(31 * time.Minute)
		synctest.Wait()
		if !cancelledAt.Equal(start.Add(time.Hour)) {
			t.Fatalf("rule: the task's context is cancelled at MaxHold: at %v, want %v", cancelledAt.Sub(start), time.Hour)
		}
		st := stateOf(t, store, "summary")
		if st.Running || st.LastOutcome != maintenance.OutcomeCancelled || !st.LastRunAt.Equal(start) {
			t.Fatalf("rule: the cut-short run is recorded as cancelled: %+v", st)
		}
		if _, held, _ := lease.Current(bg, time.Now()); held {
			t.Fatal("rule: the lease is released after the run")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v after a clean stop", err)
		}
	})
}

// TestRunDispatchesRecordsAndStopsCleanly: Run runs the heavy winner and the second pass,
// records outcomes (a panic is a failure), polls again as soon as a task ends, and on
// ctx end stops polling and waits for running tasks.
func TestRunDispatchesRecordsAndStopsCleanly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		starts := map[string][]time.Time{}
		note := func(name string) {
			mu.Lock()
			defer mu.Unlock()
			starts[name] = append(starts[name], time.Now())
		}
		start := time.Now()
		summary := heavy("summary", 10*time.Minute)
		summary.Run = func(ctx context.Context) error {
			note("summary")
			time.Sleep(45 * time.Minute)
			return nil
		}
		dream := heavy("dream", time.Hour)
		dream.Run = func(ctx context.Context) error {
			note("dream")
			time.Sleep(20 * time.Minute)
			return errors.New("model timeout")
		}
		golden := offLease("golden-path", time.Hour)
		golden.Run = func(ctx context.Context) error { note("golden-path"); panic("bad graph") }
		slow := offLease("slow-sync", 12*time.Hour)
		stopped := false
		slow.Run = func(ctx context.Context) error {
			note("slow-sync")
			<-ctx.Done()
			time.Sleep(time.Minute) // finishes its cleanup after cancellation
			mu.Lock()
			stopped = true
			mu.Unlock()
			return ctx.Err()
		}
		store := maintenance.NewMemoryStateStore()
		s := newSched(t, []maintenance.Task{summary, dream, golden, slow},
			maintenance.Config{StateStore: store, PollInterval: 7 * time.Minute, LeaseTTL: 5 * time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		if err := s.Run(ctx); err == nil {
			t.Error("a second Run returned nil; want it refused while the first runs")
		}

		time.Sleep(70 * time.Minute)
		synctest.Wait()
		mu.Lock()
		if len(starts["summary"]) == 0 || !starts["summary"][0].Equal(start) {
			t.Errorf("summary starts at the first poll: %v", starts["summary"])
		}
		if len(starts["dream"]) == 0 || !starts["dream"][0].Equal(start.Add(45*time.Minute)) {
			t.Errorf("rule: Run polls as soon as a task ends, so dream starts at 45m, not the next tick: %v", starts["dream"])
		}
		if len(starts["golden-path"]) == 0 || !starts["golden-path"][0].Equal(start) {
			t.Errorf("rule: off-lease tasks run in the second pass beside the heavy winner: %v", starts["golden-path"])
		}
		mu.Unlock()
		if st := stateOf(t, store, "dream"); st.LastOutcome != maintenance.OutcomeFailed || st.LastError != "model timeout" {
			t.Errorf("rule: a failure is recorded: %+v", st)
		}
		if st := stateOf(t, store, "golden-path"); st.LastOutcome != maintenance.OutcomeFailed {
			t.Errorf("rule: a panic is recorded as a failure: %+v", st)
		}
		if st := stateOf(t, store, "summary"); st.LastOutcome != maintenance.OutcomeSucceeded {
			t.Errorf("summary outcome: %+v", st)
		}

		cancel()
		err := <-done
		mu.Lock()
		defer mu.Unlock()
		if err != nil || !stopped {
			t.Fatalf("rule: on ctx end Run waits for running tasks: err %v, slow-sync finished %v", err, stopped)
		}
		if st := stateOf(t, store, "slow-sync"); st.Running || st.LastOutcome != maintenance.OutcomeCancelled {
			t.Fatalf("rule: the outcome of a task stopped by shutdown is recorded: %+v", st)
		}
	})
}

// TestRunCancelsTaskOnLostLease: when renewal fails because the grant was lost, Run
// cancels the heavy task at once rather than letting it run on without the lease.
func TestRunCancelsTaskOnLostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lease := maintenance.NewMemoryLease(time.Hour)
		var cancelledAt time.Time
		task := heavy("dream", day)
		task.Run = func(ctx context.Context) error {
			<-ctx.Done()
			cancelledAt = time.Now()
			return ctx.Err()
		}
		s := newSched(t, []maintenance.Task{task}, maintenance.Config{Lease: lease, MaxHold: time.Hour, LeaseTTL: 3 * time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go s.Run(ctx)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		// An operator force-releases the lease and another daemon takes it.
		g, _, _ := lease.Current(bg, time.Now())
		if err := lease.Release(bg, g); err != nil {
			t.Fatal(err)
		}
		if _, err := lease.Acquire(bg, "other", time.Hour, time.Now()); err != nil {
			t.Fatal(err)
		}
		lost := time.Now()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if cancelledAt.IsZero() || cancelledAt.Sub(lost) > time.Minute {
			t.Fatalf("rule: a lost lease cancels the task at the next renewal (every TTL/3): cancelled %v after", cancelledAt.Sub(lost))
		}
	})
}
