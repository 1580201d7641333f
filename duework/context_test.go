package duework_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// TestMemoryCancelledContext: with a done context every Memory method returns the
// context's error and changes nothing.
func TestMemoryCancelledContext(t *testing.T) {
	bg := context.Background()
	x := duework.NewMemory()
	tc, _ := tenancy.NewContext("amy")
	e := duework.Entry{UserID: "amy", WorkKey: "a", DueAt: t0}
	if err := x.Schedule(bg, tc, e); err != nil {
		t.Fatal(err)
	}
	claims, err := x.Claim(bg, []duework.Key{e.Key()}, t0, t0.Add(time.Minute))
	if err != nil || len(claims) != 1 {
		t.Fatal(claims, err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	later := e
	later.DueAt = t0.Add(time.Hour)
	calls := map[string]func() error{
		"Schedule":   func() error { return x.Schedule(ctx, tc, later) },
		"Unschedule": func() error { return x.Unschedule(ctx, tc, "a") },
		"Get": func() error {
			_, err := x.Get(ctx, tc, "a")
			return err
		},
		"DueBefore": func() error {
			_, err := x.DueBefore(ctx, t0.Add(2*time.Minute), 5)
			return err
		},
		"Ready": func() error {
			_, err := x.Ready(ctx, duework.ReadyQuery{Now: t0.Add(2 * time.Minute), Users: 5, PerUser: 5, Hold: time.Minute})
			return err
		},
		"Route": func() error { return x.Route(ctx, []duework.Route{{UserID: "amy", Group: "pro"}}) },
		"Groups": func() error {
			_, err := x.Groups(ctx, t0.Add(2*time.Minute))
			return err
		},
		"Release": func() error { return x.Release(ctx, []string{"amy"}, t0.Add(time.Minute)) },
		"ScheduleMissing": func() error {
			_, err := x.ScheduleMissing(ctx, tc, []duework.Entry{{UserID: "amy", WorkKey: "b", DueAt: t0}})
			return err
		},
		"CompleteMany": func() error {
			_, err := x.CompleteMany(ctx, []duework.Done{{Tenant: tc, Claim: claims[0], Next: later}})
			return err
		},
		"StartClaims": func() error {
			_, err := x.StartClaims(ctx, []duework.Unclaim{{Tenant: tc, Claim: claims[0]}})
			return err
		},
		"Unclaim": func() error {
			_, err := x.Unclaim(ctx, []duework.Unclaim{{Tenant: tc, Claim: claims[0]}})
			return err
		},
		"UnscheduleClaimed": func() error { return x.UnscheduleClaimed(ctx, tc, claims[0]) },
		"Claim": func() error {
			_, err := x.Claim(ctx, []duework.Key{e.Key()}, t0.Add(2*time.Minute), t0.Add(3*time.Minute))
			return err
		},
		"Complete": func() error { return x.Complete(ctx, tc, claims[0], later) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	if got, err := x.Get(bg, tc, "a"); err != nil || !got.DueAt.Equal(t0) {
		t.Errorf("after the cancelled calls Get = %+v, %v; want the entry unchanged", got, err)
	}
	if gs, err := x.Groups(bg, t0.Add(30*time.Second)); err != nil || len(gs) != 0 {
		t.Errorf("after the cancelled calls Groups = %q, %v; want none (amy's only entry is claimed)", gs, err)
	}
	if errs, err := x.StartClaims(bg, []duework.Unclaim{{Tenant: tc, Claim: claims[0]}}); err != nil || errs[0] != nil {
		t.Errorf("after the cancelled calls StartClaims = %v, %v; want the claim current and unstarted", errs, err)
	}
	if err := x.Complete(bg, tc, claims[0], later); err != nil {
		t.Errorf("the claim did not survive the cancelled calls: %v", err)
	}
	if p, err := x.Ready(bg, duework.ReadyQuery{Now: t0.Add(2 * time.Hour), Users: 5, PerUser: 5}); err != nil || len(p.Heads) != 1 || len(p.Heads[0].Due) != 1 {
		t.Errorf("after the cancelled calls Ready = %+v, %v; want amy alone, in the unrouted group, with her one entry", p, err)
	}
}
