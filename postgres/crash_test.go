package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// A dispatcher that claims a batch and dies (its pool closed, nothing completed) loses
// nothing: another dispatcher, on its own pool, finds the entries hidden until the claims
// end and dispatches every one of them again at that instant; the dead one's claims are lost.
func TestCrashedDispatcherLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	setup := pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	idx := postgres.NewIndex(setup)
	var want []string
	for u := range 10 {
		for k := range 3 {
			e := schedule(t, idx, fmt.Sprintf("u%d", u), fmt.Sprintf("k%d", k), t0.Add(time.Duration(k)*time.Second))
			want = append(want, e.UserID+":"+e.WorkKey)
		}
	}
	const claimFor = 5 * time.Minute
	cfg := dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "all", PerUserLimit: 3, PerCycleLimit: 100}},
		GlobalBatchLimit: 100,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "all", nil },
		ClaimFor:         claimFor,
	}
	newDispatcher := func() (*dispatch.Dispatcher, *postgres.Index) {
		pool := pgtest.PoolIn(t, schema, 2)
		ix := postgres.NewIndex(pool)
		d, err := dispatch.New(ix, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d, ix
	}

	now := t0.Add(time.Minute)
	doomedPool := pgtest.PoolIn(t, schema, 2)
	doomed, err := dispatch.New(postgres.NewIndex(doomedPool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := doomed.Dispatch(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemKeys(first); !slices.Equal(got, want) {
		t.Fatalf("the first dispatcher claimed %v, want all of %v", got, want)
	}
	doomedPool.Close() // the process dies holding every claim

	survivor, six := newDispatcher()
	early, err := survivor.Dispatch(ctx, now.Add(claimFor-time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(early.Items) != 0 {
		t.Fatalf("while the dead dispatcher's claims last, another dispatched %v", itemKeys(early))
	}
	again, err := survivor.Dispatch(ctx, now.Add(claimFor))
	if err != nil {
		t.Fatal(err)
	}
	if got := itemKeys(again); !slices.Equal(got, want) {
		t.Fatalf("once the claims ended the survivor dispatched %v, want all of %v", got, want)
	}
	old := first.Items[0].Claim
	err = six.Complete(ctx, mustTC(t, old.Entry.UserID), old, old.Entry)
	if !errors.Is(err, duework.ErrClaimLost) {
		t.Fatalf("completing the dead dispatcher's claim after it was re-claimed = %v, want ErrClaimLost", err)
	}
	for _, it := range again.Items {
		next := it.Claim.Entry
		next.DueAt = now.Add(time.Hour)
		if err := six.Complete(ctx, mustTC(t, next.UserID), it.Claim, next); err != nil {
			t.Fatalf("completing the survivor's claim: %v", err)
		}
	}
	checkSummary(t, setup)
}

// itemKeys lists a batch's entries as user:key, sorted.
func itemKeys(b dispatch.Batch) []string {
	var out []string
	for _, it := range b.Items {
		out = append(out, it.Claim.Entry.UserID+":"+it.Claim.Entry.WorkKey)
	}
	slices.Sort(out)
	return out
}
