package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/duework"
)

// faultScenario is a state whose clean cycle makes every kind of Index call: routing reads
// of the unrouted and a stale group, Route and Release of the users resolved (one user's
// LaneFor fails), both lanes' reads, Claim, Release of a user read and cut, and Route of a
// served user whose lane changed.
func faultScenario(t *testing.T, idx duework.Index) Config {
	schedule(t, idx, backlog("p1", 3, -100)...)
	schedule(t, idx, ent("p2", "k", -90), ent("f1", "k", -80), ent("f2", "k", -70), ent("f3", "k", -60),
		ent("mover", "k", -95), ent("n1", "k", -85), ent("bad", "k", -99), ent("s1", "k", -75))
	route(t, idx, "pro", "p1", "p2")
	route(t, idx, "free", "f1", "f2", "f3", "mover")
	route(t, idx, "plus", "s1")
	p := newPlans(map[string]Lane{"p1": "pro", "p2": "pro", "f1": "free", "f2": "free", "f3": "free",
		"mover": "pro", "n1": "free", "s1": "pro"})
	p.fail["bad"] = errors.New("plan store down")
	return Config{
		Lanes: []LaneCapacity{
			{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 3},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 5, MinShare: 2},
		},
		GlobalBatchLimit: 4, LaneFor: p.laneFor, ClaimFor: time.Hour, HoldFor: 10 * time.Second, RetryAfter: time.Minute,
	}
}

// faultCheckGroups are the groups faultScenario's users can be in.
var faultCheckGroups = []Lane{"", "plus", "pro", "free"}

// readyEverywhere returns, sorted, the users ready and unheld at now in any group.
func readyEverywhere(t *testing.T, idx duework.Index, now time.Time) []string {
	var out []string
	for _, g := range faultCheckGroups {
		out = append(out, readyUsers(t, idx, g, now)...)
	}
	slices.Sort(out)
	return out
}

// visibleUsers returns, sorted, the users with an entry visible at now, but skip.
func visibleUsers(t *testing.T, idx duework.Index, now time.Time, skip string) []string {
	var out []string
	for _, e := range allDue(t, idx, now) {
		if e.UserID != skip && !slices.Contains(out, e.UserID) {
			out = append(out, e.UserID)
		}
	}
	slices.Sort(out)
	return out
}

func TestDispatchHandsBackWhatItReadWhenACallFails(t *testing.T) {
	wantOps := []string{"Groups", "Ready", "Ready", "Route", "Release", "Ready", "Ready", "Claim", "Release", "Route"}
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		clean := &hookIndex{Index: newIndex()}
		b := mustDispatch(t, mustNew(t, clean, faultScenario(t, clean.Index)), t0)
		if diff := cmp.Diff(wantOps, clean.ops()); diff != "" {
			t.Fatalf("the clean cycle's calls (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"pro:p1/k000", "pro:p2/k", "free:mover/k", "free:n1/k"}, itemPicks(b)); diff != "" {
			t.Fatalf("the clean cycle's items (-want +got):\n%s", diff)
		}
		claimAt := slices.Index(wantOps, "Claim") + 1
		for _, down := range []bool{false, true} {
			for n := 1; n <= len(wantOps)+1; n++ {
				name := fmt.Sprintf("call %d fails", n)
				if down {
					name = fmt.Sprintf("calls from %d on fail", n)
				}
				t.Run(name, func(t *testing.T) { checkFailedCycle(t, newIndex(), n, claimAt, down) })
			}
		}
	})
}

// checkFailedCycle runs faultScenario's cycle with its n-th Index call failing (and, when
// down, every later one), claimAt being the place of its Claim, then checks that nothing
// was lost or handed out twice and that no user stays held beyond its hold.
func checkFailedCycle(t *testing.T, base duework.Index, n, claimAt int, down bool) {
	idx := &hookIndex{Index: base, failAt: n}
	if down {
		idx.fail = func(i int, _ call) bool { return i >= n }
	}
	cfg := faultScenario(t, base)
	d := mustNew(t, idx, cfg)
	b, err := d.Dispatch(context.Background(), t0)
	switch {
	case n <= claimAt && (!errors.Is(err, errInjected) || len(b.Items)+len(b.Lanes)+len(b.Unrouted) != 0):
		t.Fatalf("Dispatch = %+v, %v; want a zero Batch and the injected error", b, err)
	case n > claimAt && err != nil:
		t.Fatalf("a failure after the claim failed the cycle: %v", err)
	}
	idx.failAt, idx.fail = 0, nil

	if !down {
		// Handed back at once when the cycle failed; its lane holds lapsed by
		// now+HoldFor otherwise (bad's routing hold lasts RetryAfter).
		if err != nil {
			if diff := cmp.Diff(visibleUsers(t, base, t0, ""), readyEverywhere(t, base, t0)); diff != "" {
				t.Errorf("users not handed back after the failed cycle (-visible +ready):\n%s", diff)
			}
		}
		atHold := t0.Add(cfg.HoldFor)
		ready := slices.DeleteFunc(readyEverywhere(t, base, atHold), func(u string) bool { return u == "bad" })
		if diff := cmp.Diff(visibleUsers(t, base, atHold, "bad"), ready); diff != "" {
			t.Errorf("users still held at now+HoldFor (-visible +ready):\n%s", diff)
		}
	}
	// No hold outlives RetryAfter, whatever failed.
	atRetry := t0.Add(cfg.RetryAfter)
	if diff := cmp.Diff(visibleUsers(t, base, atRetry, ""), readyEverywhere(t, base, atRetry)); diff != "" {
		t.Errorf("users still held at now+RetryAfter (-visible +ready):\n%s", diff)
	}

	// Later cycles hand out everything, and nothing twice (every claim lasts an hour).
	handed := map[string]int{}
	for _, it := range b.Items {
		handed[it.Claim.Entry.UserID+"/"+it.Claim.Entry.WorkKey]++
	}
	for c := range 10 {
		for _, it := range mustDispatch(t, d, atRetry.Add(time.Duration(c)*time.Second)).Items {
			handed[it.Claim.Entry.UserID+"/"+it.Claim.Entry.WorkKey]++
		}
	}
	want := map[string]int{"p1/k000": 1, "p1/k001": 1, "p1/k002": 1, "p2/k": 1, "f1/k": 1, "f2/k": 1, "f3/k": 1,
		"mover/k": 1, "n1/k": 1, "s1/k": 1}
	if diff := cmp.Diff(want, handed); diff != "" {
		t.Errorf("entries handed out (-once each +got):\n%s", diff)
	}
}

func TestDispatchersShareOneIndex(t *testing.T) {
	const users, rounds, perCycle = 120, 5, 10
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		perRound := map[int]float64{}
		for _, k := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("dispatchers=%d", k), func(t *testing.T) {
				idx := newIndex()
				var routed []string
				for u := range users {
					id := fmt.Sprintf("u%03d", u)
					schedule(t, idx, backlog(id, 3, -300+u)...)
					if u%2 == 0 {
						routed = append(routed, id) // the others are new: routing runs concurrently too
					}
				}
				route(t, idx, "free", routed...)
				cfg := oneLaneConfig(1, perCycle, perCycle)
				cfg.ClaimFor = time.Hour
				ds := make([]*Dispatcher, k)
				for i := range ds {
					ds[i] = mustNew(t, idx, cfg)
				}
				handed := map[duework.Key]int{}
				items, lost := 0, 0
				for r := range rounds {
					now := t0.Add(time.Duration(r) * time.Second)
					batches := make([]Batch, k)
					start := make(chan struct{})
					var wg sync.WaitGroup
					for i, d := range ds {
						wg.Go(func() {
							<-start
							b, err := d.Dispatch(context.Background(), now)
							if err != nil {
								t.Error(err)
							}
							batches[i] = b
						})
					}
					close(start)
					wg.Wait()
					for _, b := range batches {
						for _, it := range b.Items {
							handed[it.Claim.Entry.Key()]++
						}
						items += len(b.Items)
						lost += b.Lanes[0].LostClaims
					}
				}
				for key, n := range handed {
					if n > 1 {
						t.Errorf("%v handed out %d times while its claim lasts", key, n)
					}
				}
				if lost*100 > items {
					t.Errorf("%d lost claims for %d items: more than 1%%", lost, items)
				}
				perRound[k] = float64(items) / rounds
				t.Logf("%d dispatchers: %.1f items per round, %d lost claims", k, perRound[k], lost)
			})
		}
		if perRound[2] <= perRound[1] || perRound[4] < 3*perRound[1] {
			t.Errorf("items per round with 1, 2, 4 dispatchers: %v; want more with two, ≥ 3× with four", perRound)
		}
	})
}
