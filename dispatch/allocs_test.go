package dispatch

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
)

// fixedIndex serves the same heads at every DueHeads and claims every key but the lost
// ones, from slices built once: its calls allocate nothing, so AllocsPerRun over a
// Dispatch on it counts the Dispatcher's own allocations and nothing else.
type fixedIndex struct {
	duework.Index // nil: only DueHeads and Claim are called
	heads         []duework.Head
	claims        []duework.Claim
}

func (x *fixedIndex) DueHeads(context.Context, time.Time, int) ([]duework.Head, error) {
	return x.heads, nil
}

func (x *fixedIndex) Claim(context.Context, []duework.Key, time.Time, time.Time) ([]duework.Claim, error) {
	return x.claims, nil
}

// allocScenario is a cycle through Dispatch's main paths: two lanes, users shed by their
// cap and by the lane's limit, and one lost claim. No user is unrouted: the reason is built
// with fmt.Errorf, whose sync.Pool the race detector empties at random, and the count must
// be exact under -race too. It returns the Config, without an Observer, and the index.
func allocScenario(t rapid.TB) (Config, *fixedIndex) {
	t.Helper()
	x := &fixedIndex{}
	for u := range 12 {
		user := fmt.Sprintf("u%02d", u)
		h := duework.Head{UserID: user, LastServed: t0.Add(-time.Duration(u) * time.Minute)}
		for k := range 3 {
			h.Due = append(h.Due, ent(user, fmt.Sprintf("k%d", k), -100+u*3+k))
		}
		h.More = u == 0
		x.heads = append(x.heads, h)
	}
	cfg := Config{
		Lanes: []LaneCapacity{
			{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 8},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 4},
		},
		GlobalBatchLimit: 10,
		LaneFor: func(_ context.Context, user string) (Lane, error) {
			if user < "u04" {
				return "pro", nil
			}
			return "free", nil
		},
		ClaimFor: time.Minute,
	}
	// Claim everything Select picks but the first pick.
	sel := Select(SelectInput{Heads: x.heads, LaneOf: map[string]Lane{
		"u00": "pro", "u01": "pro", "u02": "pro", "u03": "pro",
		"u04": "free", "u05": "free", "u06": "free", "u07": "free", "u08": "free", "u09": "free", "u10": "free", "u11": "free",
	}, Lanes: cfg.Lanes, GlobalBatchLimit: cfg.GlobalBatchLimit})
	for i, s := range sel.Items {
		if i == 0 {
			continue
		}
		x.claims = append(x.claims, duework.Claim{Entry: s.Entry, Token: uint64(i), Until: t0.Add(time.Minute)})
	}
	return cfg, x
}

// dispatchAllocs is the number of allocations of one Dispatch of allocScenario under cfg.
func dispatchAllocs(t testing.TB, cfg Config, x *fixedIndex) float64 {
	t.Helper()
	d, err := New(x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testing.AllocsPerRun(50, func() {
		if _, err := d.Dispatch(context.Background(), t0); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDispatchPairsClaimsLikeALookupByKey pins how Dispatch pairs claims with selected
// items — each selected key gets the last claim of it, or counts as lost — whatever Claim
// returns: in order or not, with claims lost, with a claim repeated or foreign, and with a
// head that repeats an entry (the last two break the Index contract).
func TestDispatchPairsClaimsLikeALookupByKey(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg, x := allocScenario(rt)
		if rapid.Bool().Draw(rt, "repeat an entry") {
			h := &x.heads[rapid.IntRange(0, len(x.heads)-1).Draw(rt, "head")]
			h.Due = append(slices.Clone(h.Due[:1]), h.Due...)
		}
		laneOf := map[string]Lane{}
		for _, h := range x.heads {
			lane, _ := cfg.LaneFor(context.Background(), h.UserID)
			laneOf[h.UserID] = lane
		}
		sel := Select(SelectInput{Heads: x.heads, LaneOf: laneOf, Lanes: cfg.Lanes, GlobalBatchLimit: cfg.GlobalBatchLimit})
		var pool []duework.Claim
		for i, s := range sel.Items {
			pool = append(pool, duework.Claim{Entry: s.Entry, Token: uint64(i + 1), Until: t0.Add(time.Minute)})
		}
		pool = append(pool, duework.Claim{Entry: ent("stranger", "s", 0), Token: 99})
		// A subsequence of the pool, maybe shuffled, maybe with a claim given twice.
		x.claims = nil
		for _, c := range pool[:len(pool)-1] {
			if rapid.Bool().Draw(rt, "claimed") {
				x.claims = append(x.claims, c)
			}
		}
		if rapid.Bool().Draw(rt, "foreign claim") {
			x.claims = append(x.claims, pool[len(pool)-1])
		}
		if len(x.claims) > 0 && rapid.Bool().Draw(rt, "claim twice") {
			c := x.claims[rapid.IntRange(0, len(x.claims)-1).Draw(rt, "twice")]
			c.Token += 100
			x.claims = append(x.claims, c)
		}
		if rapid.Bool().Draw(rt, "shuffle") {
			x.claims = rapid.Permutation(x.claims).Draw(rt, "order")
		}

		last := map[duework.Key]duework.Claim{}
		for _, c := range x.claims {
			last[c.Entry.Key()] = c
		}
		want := Batch{ShedUserIDs: sel.ShedUserIDs, Lanes: make([]LaneReport, len(cfg.Lanes))}
		for i, lc := range cfg.Lanes {
			want.Lanes[i].Lane = lc.Lane
			for _, lane := range laneOf {
				if lane == lc.Lane {
					want.Lanes[i].Users++
				}
			}
			for _, u := range sel.ShedUserIDs {
				if laneOf[u] == lc.Lane {
					want.Lanes[i].Shed++
				}
			}
		}
		for _, s := range sel.Items {
			li := slices.IndexFunc(cfg.Lanes, func(lc LaneCapacity) bool { return lc.Lane == s.Lane })
			c, ok := last[s.Entry.Key()]
			if !ok {
				want.Lanes[li].LostClaims++
				continue
			}
			want.Items = append(want.Items, Item{Claim: c, Lane: s.Lane})
			want.Lanes[li].Dispatched++
		}

		got := mustDispatch(rt, mustNew(rt, x, cfg), t0)
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			rt.Fatalf("Dispatch differs from pairing by key (-want +got):\n%s", diff)
		}
	})
}
