package dispatch

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
)

// Weighted lanes end to end: a Dispatcher over an Index that applies the weight stride
// (duework.Index, Flow control: a claim of k items moves a user of weight w only k/w of
// the way from its Turn to the claim's now).

// weightedLane is one lane of continuously ready users with the given weights, served L
// items a cycle (PerUserLimit 1, so a user of weight w may have w). Each user holds 2w+2
// entries, written at t0 due at t0, and every item is completed due again at the cycle's
// now, so every user always has visible work older than its stride position and no entry
// is due before the now of its write.
type weightedLane struct {
	t       rapid.TB
	idx     duework.Index
	d       *Dispatcher
	users   []string
	weights []int
	now     time.Time
}

func newWeightedLane(t rapid.TB, idx duework.Index, weights []int, perCycle int) *weightedLane {
	w := &weightedLane{t: t, idx: idx, weights: weights, now: t0}
	limits := map[string]duework.Limits{}
	for u, wt := range weights {
		id := fmt.Sprintf("u%02d", u)
		w.users = append(w.users, id)
		limits[id] = duework.Limits{Weight: wt}
		for k := range 2*wt + 2 {
			schedule(t, idx, ent(id, fmt.Sprintf("k%d", k), 0))
		}
	}
	cfg := oneLaneConfig(1, perCycle, perCycle)
	cfg.LimitsFor = func(_ context.Context, u string) (duework.Limits, error) { return limits[u], nil }
	w.d = mustNew(t, idx, cfg)
	return w
}

// cycle runs one cycle a second after the last and returns the items each user got.
func (w *weightedLane) cycle() map[string]int {
	w.now = w.now.Add(time.Second)
	b := mustDispatch(w.t, w.d, w.now)
	complete(w.t, w.idx, b, w.now)
	got := map[string]int{}
	for _, it := range b.Items {
		got[it.Claim.Entry.UserID]++
	}
	return got
}

func genWeights(t *rapid.T, users, most int) []int {
	ws := make([]int, rapid.IntRange(2, users).Draw(t, "users"))
	for i := range ws {
		ws[i] = 1
		if rapid.Bool().Draw(t, "heavy") {
			ws[i] = rapid.IntRange(1, most).Draw(t, "weight")
		}
	}
	return ws
}

// TestDispatchGivesWeightedShares: with one item a cycle (L = 1, PerUserLimit 1), each
// continuously ready user's share of the lane over a long run is within 10 % of
// Weight/ΣWeight.
//
// The property is drawn at L = 1 only. With L > 1 it cannot hold, whatever the weights:
// the users a cycle serves share one LastServed, so their Turns tie and UserID breaks the
// tie the same way every cycle. With 9 users of weight 1 and L = 5, u00 is served every
// cycle (a share of 20 % against 11.1 %); with weights 2, 2, 1, 1, 1 and L = 3 the two
// heavy users are served every cycle (33 % each against 28.6 %) and the others 11.1 %
// against 14.3 %. The wait bound holds at every L (TestDispatchKeepsTheWeightedWaitBound).
func TestDispatchGivesWeightedShares(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		worst := 0.0
		rapid.Check(t, func(rt *rapid.T) {
			weights := genWeights(rt, 5, 3)
			sum := 0
			for _, w := range weights {
				sum += w
			}
			lane := newWeightedLane(rt, newIndex(), weights, 1)
			for range 2 * sum { // warm up: every user has been served
				lane.cycle()
			}
			cycles := 40 * sum
			got := map[string]int{}
			for range cycles {
				for u, n := range lane.cycle() {
					got[u] += n
				}
			}
			for i, u := range lane.users {
				want := float64(weights[i]) / float64(sum)
				share := float64(got[u]) / float64(cycles)
				err := math.Abs(share-want) / want
				worst = max(worst, err)
				if err > 0.1 {
					rt.Fatalf("weights %v: %s (weight %d) got %d of %d items, a share of %.3f against %.3f (%.0f %% off)",
						weights, u, weights[i], got[u], cycles, share, want, 100*err)
				}
			}
		})
		t.Logf("the worst share error drawn: %.1f %%", 100*worst)
	})
}

// TestDispatchKeepsTheWeightedWaitBound: every continuously ready user of weight w is
// served within ceil(U/L) + ceil(ΣWeight/(w·L)) consecutive cycles, at any L, from a start
// where every user's work came due at the first write.
//
// After an outage it holds as far as the index's stride floor lets it: a heavy user whose
// Turn lies far in the past starts each stride after its first serve no earlier than
// now − 3w·(now − LastServed), so it catches up in a few serves. With L = 1 and every entry
// due an hour before the first cycle, the weight-1 users of weights 10, 1, 1, 1 go at most
// 17 cycles unserved (bound 17), and with weights 2, 1 and entries 1,000 s old 4 (bound
// 5); a weight a hundred times the others', 100, 1, 1, 1, still keeps them 149 cycles
// (bound 107).
func TestDispatchKeepsTheWeightedWaitBound(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			weights := genWeights(rt, 7, 4)
			perCycle := rapid.IntRange(1, len(weights)).Draw(rt, "perCycle")
			sum := 0
			for _, w := range weights {
				sum += w
			}
			lane := newWeightedLane(rt, newIndex(), weights, perCycle)
			last := make([]int, len(weights))
			for c := 1; c <= 20*sum; c++ {
				got := lane.cycle()
				for i, u := range lane.users {
					if got[u] > 0 {
						last[i] = c
					}
					bound := ceilDiv(len(weights), perCycle) + ceilDiv(sum, weights[i]*perCycle)
					if c-last[i] >= bound {
						rt.Fatalf("weights %v, L %d: cycle %d, %s (weight %d) last served in cycle %d; the bound is %d cycles",
							weights, perCycle, c, u, weights[i], last[i], bound)
					}
				}
			}
		})
	})
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
