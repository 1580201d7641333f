package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/duework"
)

// A paused tenant waits on itself: its lane never reads it while the pause lasts, so it is
// neither served, shed, counted late, nor the lane's WaitingSince, however old its work;
// and when the pause ends it is served as anyone.
func TestDispatchPassesOverAPausedTenant(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		schedule(t, idx, backlog("p", 3, -1000)...)
		schedule(t, idx, ent("a", "k", -10), ent("b", "k", -5))
		route(t, idx, "free", "p", "a", "b")
		if err := idx.Pause(context.Background(), tenant(t, "p"), t0.Add(time.Hour), "upstream-429"); err != nil {
			t.Fatal(err)
		}

		// Room for one: a is served and b, the first ready user not served, is waiting.
		b := mustDispatch(t, mustNew(t, idx, oneLaneConfig(1, 1, 1)), t0)
		if diff := cmp.Diff([]string{"free:a/k"}, itemPicks(b)); diff != "" {
			t.Errorf("items with room for one (-want +got):\n%s", diff)
		}
		want := LaneReport{Lane: "free", Users: 1, Dispatched: 1, WaitingSince: at(-5), OldestDue: at(-10),
			Overdue: []Overdue{{UserID: "a", DueAt: at(-10)}}}
		if diff := cmp.Diff(want, b.Lanes[0]); diff != "" {
			t.Errorf("the lane's report with room for one (-want +got):\n%s", diff)
		}
		// Room for all: every ready user is served and no one waits, p's backlog included.
		b = mustDispatch(t, mustNew(t, idx, oneLaneConfig(5, 5, 5)), t0)
		if diff := cmp.Diff([]string{"free:b/k"}, itemPicks(b)); diff != "" {
			t.Errorf("items with room for all (-want +got):\n%s", diff)
		}
		if got := b.Lanes[0]; !got.WaitingSince.IsZero() || got.Shed != 0 || len(b.ShedUserIDs) != 0 || got.Users != 1 {
			t.Errorf("the lane's report with room for all = %+v, shed %v; want b read and served, no one waiting or shed", got, b.ShedUserIDs)
		}
		// A starved lane's peek for its WaitingSince does not find p either.
		schedule(t, idx, ent("c", "k", -1))
		route(t, idx, "free", "c")
		b, err := mustNew(t, idx, oneLaneConfig(5, 5, 5)).DispatchAtMost(context.Background(), t0, Take{Total: 5, PerLane: map[Lane]int{"free": 0}})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Lanes[0]; len(b.Items) != 0 || !got.WaitingSince.Equal(at(-1)) {
			t.Errorf("a starved lane's report = %+v with %d items; want none and WaitingSince c's turn", got, len(b.Items))
		}

		// When the pause ends p joins the back of the queue, at its end, and is served.
		later := t0.Add(time.Hour)
		b = mustDispatch(t, mustNew(t, idx, oneLaneConfig(1, 5, 5)), later)
		if picks := itemPicks(b); !slices.Contains(picks, "free:p/k000") {
			t.Errorf("items after the pause: %v, want p's oldest among them", picks)
		}
	})
}
