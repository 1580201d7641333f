package dispatch

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/duework"
)

// A Dispatcher reuses its cycles' working memory, and a Batch it returned never changes
// because of a later cycle: each later cycle reads, chooses and claims other users and
// entries into the same memory, and the first Batch, compared with a copy made when it was
// returned, is as it was.
func TestBatchOutlivesTheNextCycles(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		for u := range 30 {
			user := fmt.Sprintf("u%02d", u)
			schedule(t, idx, ent(user, "a", -30+u), ent(user, "b", -20+u), ent(user, "c", -10+u))
		}
		d := mustNew(t, idx, Config{
			Lanes:            []LaneCapacity{{Lane: "all", PerUserLimit: 1, PerCycleLimit: 10}},
			GlobalBatchLimit: 10,
			LaneFor:          func(context.Context, string) (Lane, error) { return "all", nil },
			ClaimFor:         time.Minute,
		})
		ctx := context.Background()
		first, err := d.Dispatch(ctx, t0)
		if err != nil || len(first.Items) != 10 {
			t.Fatalf("first Dispatch: %d items, %v; want 10", len(first.Items), err)
		}
		kept := cloneBatch(first)
		for i := range 5 {
			b, err := d.Dispatch(ctx, t0)
			if err != nil {
				t.Fatalf("Dispatch %d: %v", i+2, err)
			}
			if i < 2 && len(b.Items) != 10 {
				t.Fatalf("Dispatch %d: %d items, want 10", i+2, len(b.Items))
			}
		}
		if diff := cmp.Diff(kept, first); diff != "" {
			t.Errorf("the first Batch changed after later cycles (-then +now):\n%s", diff)
		}
	})
}

// cloneBatch copies b and every slice it holds.
func cloneBatch(b Batch) Batch {
	b.Items = slices.Clone(b.Items)
	b.ShedUserIDs = slices.Clone(b.ShedUserIDs)
	b.Unrouted = slices.Clone(b.Unrouted)
	b.Lanes = slices.Clone(b.Lanes)
	for i := range b.Lanes {
		b.Lanes[i].Overdue = slices.Clone(b.Lanes[i].Overdue)
	}
	return b
}
