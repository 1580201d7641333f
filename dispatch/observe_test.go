package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rotaworks/rota/duework"
)

// preFeatureDispatchAllocs is what one Dispatch of allocScenario allocated before
// observers existed, without and with -race (the race detector keeps fewer values on the
// stack). Measured once on the dispatcher of commit dab1807 (dispatcher.go as of e0d6ff0,
// without Config.Observer): the module at that commit (git archive) in a temporary
// directory, allocs_test.go copied in, dispatchAllocs(allocScenario) logged by a throwaway
// test under `go test` and `go test -race`: 39 and 44.
func preFeatureDispatchAllocs() float64 {
	if raceBuild {
		return 44
	}
	return 39
}

// currentDispatchAllocs is what one Dispatch of allocScenario allocates now: the tighter
// pin. It fell from 39 (44 under -race) when the claims' map began to hold indexes, not
// claims, which a map stores out of line (30, 35), and when Select sized its lane buckets
// and fair orders once instead of growing them (24 with and without -race: the race
// detector's extra allocations were those growing slices).
func currentDispatchAllocs() float64 {
	return 24
}

func TestDispatchWithoutObserverAllocatesAsBefore(t *testing.T) {
	cfg, x := allocScenario(t)
	got := dispatchAllocs(t, cfg, x)
	if got > preFeatureDispatchAllocs() {
		t.Errorf("Dispatch with a nil Observer allocates %v times per cycle, before observers it was %v", got, preFeatureDispatchAllocs())
	}
	if got != currentDispatchAllocs() {
		t.Errorf("Dispatch with a nil Observer allocates %v times per cycle, want exactly %v (update the pin if the change is intended)", got, currentDispatchAllocs())
	}
	// With an observer, the only extra allocation is the slice of shed users' lanes.
	var n int
	cfg.Observer = ObserverFunc(func(CycleInfo) { n++ })
	if got := dispatchAllocs(t, cfg, x); got != currentDispatchAllocs()+1 {
		t.Errorf("Dispatch with an Observer allocates %v times per cycle, want %v", got, currentDispatchAllocs()+1)
	}
	if n == 0 {
		t.Error("the observer was never called")
	}
}

// cycleRecorder is an in-memory Observer.
type cycleRecorder struct{ infos []CycleInfo }

func (r *cycleRecorder) ObserveDispatch(info CycleInfo) { r.infos = append(r.infos, info) }

func TestObserverSeesEveryCycle(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("noisy", 10, -100)...)
		schedule(t, idx, ent("carol", "c", -5), ent("quiet", "q", -1), ent("ghost", "g", -2), ent("later", "l", 100))
		// Another dispatcher takes carol's entry between our read and our claim.
		idx.beforeClaim = func([]duework.Key) {
			idx.beforeClaim = nil
			if _, err := idx.Index.Claim(context.Background(), []duework.Key{{UserID: "carol", WorkKey: "c"}}, t0, t0.Add(time.Hour)); err != nil {
				t.Error(err)
			}
		}
		rec := &cycleRecorder{}
		cfg := twoLanes() // ghost has no plan
		cfg.Observer = rec
		d := mustNew(t, idx, cfg)

		// Cycle 1: noisy is shed by the pro lane's cap, ghost by being unrouted; carol's
		// claim is lost.
		b1 := mustDispatch(t, d, t0)
		// Cycle 2: the index fails.
		idx.dueHeadsErr = errors.New("disk on fire")
		_, err2 := d.Dispatch(context.Background(), t0.Add(time.Second))
		if err2 == nil {
			t.Fatal("cycle 2: no error")
		}
		// Cycle 3, through Cycle: the rest of noisy's backlog; quiet's claim still lasts.
		idx.dueHeadsErr = nil
		info3, err := d.Cycle(context.Background(), t0.Add(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}

		if len(rec.infos) != 3 {
			t.Fatalf("observer saw %d cycles, want 3", len(rec.infos))
		}
		// Every report holds exactly the batch its caller got.
		if diff := cmp.Diff(b1, rec.infos[0].Batch, sameMessage); diff != "" {
			t.Errorf("cycle 1: reported batch differs from Dispatch's (-returned +reported):\n%s", diff)
		}
		if diff := cmp.Diff(info3, rec.infos[2], sameMessage); diff != "" {
			t.Errorf("cycle 3: reported info differs from Cycle's (-returned +reported):\n%s", diff)
		}

		type want struct {
			now      time.Time
			picks    []string
			lanes    []LaneReport
			shed     []ShedUser
			unrouted []string
			err      error
		}
		wants := []want{
			{
				now:   t0,
				picks: []string{"pro:noisy/k000", "pro:noisy/k001", "free:quiet/q"},
				lanes: []LaneReport{
					{Lane: "pro", Users: 2, Dispatched: 2, Shed: 1, LostClaims: 1},
					{Lane: "free", Users: 1, Dispatched: 1},
				},
				shed:     []ShedUser{{UserID: "ghost"}, {UserID: "noisy", Lane: "pro"}},
				unrouted: []string{"ghost"},
			},
			{now: t0.Add(time.Second), err: err2},
			{
				now:   t0.Add(2 * time.Second),
				picks: []string{"pro:noisy/k002", "pro:noisy/k003"},
				lanes: []LaneReport{
					{Lane: "pro", Users: 1, Dispatched: 2, Shed: 1},
					{Lane: "free", Users: 0},
				},
				shed:     []ShedUser{{UserID: "ghost"}, {UserID: "noisy", Lane: "pro"}},
				unrouted: []string{"ghost"},
			},
		}
		for i, w := range wants {
			got := rec.infos[i]
			if !got.Now.Equal(w.now) {
				t.Errorf("cycle %d: Now %v, want %v", i+1, got.Now, w.now)
			}
			if diff := cmp.Diff(w.picks, itemPicks(got.Batch), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cycle %d: items (-want +got):\n%s", i+1, diff)
			}
			for _, it := range got.Batch.Items {
				if !it.Claim.Until.Equal(w.now.Add(time.Minute)) || it.Claim.Token == 0 {
					t.Errorf("cycle %d: item %v claimed until %v with token %d", i+1, it.Claim.Entry.Key(), it.Claim.Until, it.Claim.Token)
				}
			}
			if diff := cmp.Diff(w.lanes, got.Batch.Lanes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cycle %d: lanes (-want +got):\n%s", i+1, diff)
			}
			if diff := cmp.Diff(w.shed, got.Shed, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cycle %d: shed users (-want +got):\n%s", i+1, diff)
			}
			var shedIDs []string
			for _, s := range w.shed {
				shedIDs = append(shedIDs, s.UserID)
			}
			if diff := cmp.Diff(shedIDs, got.Batch.ShedUserIDs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cycle %d: ShedUserIDs (-want +got):\n%s", i+1, diff)
			}
			var unrouted []string
			for _, u := range got.Batch.Unrouted {
				unrouted = append(unrouted, u.UserID)
				if u.Err == nil {
					t.Errorf("cycle %d: unrouted %s without a reason", i+1, u.UserID)
				}
			}
			if diff := cmp.Diff(w.unrouted, unrouted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cycle %d: unrouted (-want +got):\n%s", i+1, diff)
			}
			if got.Err != w.err {
				t.Errorf("cycle %d: Err %v, want %v", i+1, got.Err, w.err)
			}
		}
	})
}

func TestCycleMatchesDispatch(t *testing.T) {
	// Rule 7 holds through Cycle too, observer or not: the same state and now give the
	// same batch as Dispatch.
	build := func() *Dispatcher {
		idx := duework.NewMemory()
		schedule(t, idx, backlog("noisy", 10, -100)...)
		schedule(t, idx, ent("carol", "c", -5), ent("quiet", "q", -1), ent("ghost", "g", -2))
		return mustNew(t, idx, twoLanes())
	}
	b := mustDispatch(t, build(), t0)
	info, err := build().Cycle(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, info.Batch, sameMessage); diff != "" {
		t.Errorf("Cycle's batch differs from Dispatch's (-Dispatch +Cycle):\n%s", diff)
	}
	if diff := cmp.Diff([]ShedUser{{UserID: "ghost"}, {UserID: "noisy", Lane: "pro"}}, info.Shed); diff != "" {
		t.Errorf("shed users (-want +got):\n%s", diff)
	}
}
