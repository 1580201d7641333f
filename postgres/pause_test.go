package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// A pause written through one pool holds a dispatcher on another pool, as it holds every
// replica: a Dispatcher over a second Index on a second pool claims none of the paused
// tenant's entries, however old, while the pause lasts, serves everyone else meanwhile, and
// claims the tenant's entries once the pause ends.
func TestPauseHoldsADispatcherOnAnotherPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_pause")
	admin := pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(ctx, admin); err != nil {
		t.Fatal(err)
	}
	writer := postgres.NewIndex(admin)
	for _, k := range []string{"a", "b", "c"} {
		schedule(t, writer, "noisy", k, t0.Add(-time.Hour))
		schedule(t, writer, "amy", k, t0.Add(-time.Minute))
	}
	schedule(t, writer, "bo", "a", t0)
	until := t0.Add(time.Hour)
	if err := writer.Pause(ctx, mustTC(t, "noisy"), until, "upstream-429"); err != nil {
		t.Fatal(err)
	}

	other := postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
	d, err := dispatch.New(other, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 5, PerCycleLimit: 100}},
		GlobalBatchLimit: 100,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	served := func(now time.Time) []string {
		t.Helper()
		b, err := d.Dispatch(ctx, now)
		if err != nil {
			t.Fatalf("Dispatch at %s: %v", since(now), err)
		}
		var got []string
		for _, it := range b.Items {
			got = append(got, it.Claim.Entry.UserID+"/"+it.Claim.Entry.WorkKey)
		}
		slices.Sort(got)
		if slices.Contains(b.ShedUserIDs, "noisy") || (len(b.Lanes) > 0 && b.Lanes[0].WaitingSince.Equal(until)) {
			t.Errorf("at %s the paused tenant was shed or kept its lane waiting: %+v", since(now), b)
		}
		return got
	}
	if got, want := served(t0), []string{"amy/a", "amy/b", "amy/c", "bo/a"}; !slices.Equal(got, want) {
		t.Errorf("at t0 the other pool's dispatcher claimed %v, want %v and nothing of the paused tenant's", got, want)
	}
	// The others' claims end each minute; the paused tenant stays unclaimed to its end.
	for _, now := range []time.Time{t0.Add(2 * time.Minute), t0.Add(30 * time.Minute), until.Add(-time.Microsecond)} {
		for _, got := range served(now) {
			if strings.HasPrefix(got, "noisy/") {
				t.Errorf("at %s, with noisy paused until %s, the other pool's dispatcher claimed %s", since(now), since(until), got)
			}
		}
	}
	if ps, err := other.Paused(ctx, t0, "", 10); err != nil || len(ps) != 1 || ps[0].UserID != "noisy" || ps[0].Reason != "upstream-429" || !ps[0].Until.Equal(until) {
		t.Errorf("the other pool's Paused = %+v, %v; want noisy until %s for upstream-429", ps, err, since(until))
	}
	got := served(until)
	for _, k := range []string{"noisy/a", "noisy/b", "noisy/c"} {
		if !slices.Contains(got, k) {
			t.Errorf("when the pause ended the other pool's dispatcher claimed %v, want %s among them", got, k)
		}
	}
	if ps, err := writer.Paused(ctx, t0, "", 10); err != nil || len(ps) != 0 {
		t.Errorf("after noisy was served past its pause, Paused = %+v, %v; want none", ps, err)
	}
	if st, err := writer.User(ctx, "noisy", t0); err != nil || !st.PausedUntil.IsZero() || !st.LastServed.Equal(until) {
		t.Errorf("noisy after its serve at %s = %+v, %v; want no pause", since(until), st, err)
	}
}
