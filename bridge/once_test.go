package bridge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// TestACopyOfARunningItemIsNotRun: one Worker given an item twice at once — a queue's
// redelivery while the first copy runs — runs it once; the copy ends as a duplicate,
// writes nothing and is no error.
func TestACopyOfARunningItemIsNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := newGate()
		w := newWorld(t, worldConfig{pipe: gate})
		w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
		item := w.dispatchAll(t, t0, 1)[0]
		wk := w.worker(t, bridge.WorkerConfig{Workers: 4})
		reps := make(chan bridge.ItemReport, 2)
		go func() { reps <- wk.Do(context.Background(), item, t0) }()
		<-gate.started
		go func() { reps <- wk.Do(context.Background(), item, t0) }()
		dup := <-reps
		if dup.Status != bridge.StatusDuplicate || dup.Written || !errors.Is(dup.Err, duework.ErrClaimStarted) {
			t.Fatalf("the copy: %+v, want a duplicate, unwritten, wrapping ErrClaimStarted", dup)
		}
		close(gate.release)
		if rep := <-reps; rep.Status != bridge.StatusHit || !rep.Written {
			t.Fatalf("the first copy: %+v, want its hit written", rep)
		}
		synctest.Wait()
		if n := len(gate.started); n != 0 {
			t.Fatalf("%d more runs, want the item run once", n)
		}
	})
}

// TestTwoWorkersOverOneIndexRunAnItemOnce: copies of one item handed to two Workers over
// one index at once run once between them, however the race goes.
func TestTwoWorkersOverOneIndexRunAnItemOnce(t *testing.T) {
	for range 20 {
		pipe := newStub()
		w := newWorld(t, worldConfig{pipe: pipe})
		w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
		item := w.dispatchAll(t, t0, 1)[0]
		wks := []*bridge.Worker{w.worker(t, bridge.WorkerConfig{}), w.worker(t, bridge.WorkerConfig{})}
		statuses := make([]bridge.ItemStatus, 4)
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() { statuses[i] = wks[i%2].Do(context.Background(), item, t0).Status })
		}
		wg.Wait()
		runs, dups := 0, 0
		for _, st := range statuses {
			switch st {
			case bridge.StatusMiss:
				runs++
			case bridge.StatusDuplicate, bridge.StatusLostClaim: // a copy after the first completed
				dups++
			}
		}
		if runs != 1 || dups != 3 || pipe.ncalls() != 1 {
			t.Fatalf("statuses %v with %d pipeline runs; want one run and three copies not run", statuses, pipe.ncalls())
		}
	}
}

// TestRunDueItemRefusesACopyAlreadyStarted: RunDueItem, a Worker of one item, runs
// nothing for an item whose claim another copy started, and says so.
func TestRunDueItemRefusesACopyAlreadyStarted(t *testing.T) {
	f := newFixture()
	f.dueEntry(t, "a", "hot", 0)
	item := claim(t, f.idx, "u1", "a", t0)
	errs, err := f.idx.StartClaims(context.Background(), []duework.Unclaim{{Tenant: mustTC(t, "u1"), Claim: item.Claim}})
	if err != nil || errs[0] != nil {
		t.Fatalf("StartClaims = %v, %v", errs, err)
	}
	res, err := f.b.RunDueItem(context.Background(), item, t0)
	if res != nil || !errors.Is(err, duework.ErrClaimStarted) || f.pipe.ncalls() != 0 {
		t.Fatalf("RunDueItem(a started copy) = %v, %v with %d runs; want ErrClaimStarted and nothing run", res, err, f.pipe.ncalls())
	}
}

// TestAStartedItemIsNeverHandedBackWithUnclaim: a Runner's item whose claim started but
// which could not run before the claim's end is completed unchanged instead (Unclaim
// refuses a started claim), so it is due at once and nothing is lost.
func TestAStartedItemIsNeverHandedBackWithUnclaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := &slowStart{countingIndex: newCountingIndex(), delay: 2 * time.Minute}
		pipe := newStub()
		w := newWorld(t, worldConfig{idx: idx, pipe: pipe, claimFor: time.Minute})
		w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
		item := w.dispatchAll(t, t0, 1)[0]
		rep := w.worker(t, bridge.WorkerConfig{}).Do(context.Background(), item, t0)
		if rep.Status != bridge.StatusLate || !rep.Written || pipe.ncalls() != 0 || idx.n("Unclaim") != 0 {
			t.Fatalf("Do = %+v with %d runs and %d Unclaims; want late, completed unchanged, nothing run", rep, pipe.ncalls(), idx.n("Unclaim"))
		}
		if e := get(t, w.idx, "u1", "a"); !e.DueAt.Equal(t0) || !e.LastRunAt.IsZero() {
			t.Fatalf("the entry after the hand-back: %+v, want it unchanged", e)
		}
	})
}

// slowStart is an index whose StartClaims takes delay (in a synctest bubble).
type slowStart struct {
	*countingIndex
	delay time.Duration
}

func (s *slowStart) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	errs, err := s.countingIndex.StartClaims(ctx, claims)
	time.Sleep(s.delay)
	return errs, err
}
