package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

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
func allocScenario(t testing.TB) (Config, *fixedIndex) {
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
