package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/duework"
)

// cycleRecorder is an in-memory Observer.
type cycleRecorder struct{ infos []CycleInfo }

func (r *cycleRecorder) ObserveDispatch(info CycleInfo) { r.infos = append(r.infos, info) }

func TestObserverSeesEveryCycleAsDispatchReturnsIt(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("noisy", 10, -100)...)
		schedule(t, idx, ent("carol", "c", -5), ent("quiet", "q", -1), ent("ghost", "g", -2))
		rec := &cycleRecorder{}
		cfg := twoLanes() // ghost has no plan
		cfg.Observer = rec
		d := mustNew(t, idx, cfg)

		b1, err1 := d.Dispatch(context.Background(), t0)
		idx.fail = func(int, call) bool { return true }
		b2, err2 := d.Dispatch(context.Background(), t0.Add(time.Second))
		idx.fail = nil
		b3, err3 := d.Dispatch(context.Background(), t0.Add(2*time.Second))
		if err1 != nil || err3 != nil || !errors.Is(err2, errInjected) {
			t.Fatalf("cycles returned %v, %v, %v; want only the second to fail", err1, err2, err3)
		}
		want := []CycleInfo{
			{Now: t0, Batch: b1},
			{Now: t0.Add(time.Second), Batch: b2, Err: err2},
			{Now: t0.Add(2 * time.Second), Batch: b3},
		}
		if diff := cmp.Diff(want, rec.infos, sameMessage); diff != "" {
			t.Errorf("observed cycles (-returned +observed):\n%s", diff)
		}
		if len(b1.Items) == 0 || len(b1.Unrouted) != 1 || len(b3.Items) == 0 {
			t.Errorf("the scenario dispatched too little to show anything: %+v, %+v", b1, b3)
		}
	})
}
