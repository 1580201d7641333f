package rotadynamo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/tenancy"
)

// The Index takes part in local starts (internal/localstart), as a Runner's claims need:
// a Claim under a set writes its claims started and puts them in the set, so the holder
// starts each with no write while it lasts, and hands back those it has not started,
// while another process finds them started and can neither start nor hand back one.
func TestClaimsOfALocalSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openTest(t, 2)
	x := st.Index
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	amy, err := tenancy.NewContext("amy")
	if err != nil {
		t.Fatal(err)
	}
	for _, wk := range []string{"a", "b"} {
		if err := x.Schedule(ctx, amy, duework.Entry{UserID: "amy", WorkKey: wk, Tier: "hot", DueAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	set := localstart.New(func() time.Time { return now })
	local := localstart.With(ctx, set)
	cs, err := x.Claim(local, []duework.Key{{UserID: "amy", WorkKey: "a"}, {UserID: "amy", WorkKey: "b"}}, now, now.Add(time.Minute))
	if err != nil || len(cs) != 2 || set.Len() != 2 {
		t.Fatalf("Claim under a set: %d claims, %v, %d in the set; want both in it", len(cs), err, set.Len())
	}
	a, b := []duework.Unclaim{{Tenant: amy, Claim: cs[0]}}, []duework.Unclaim{{Tenant: amy, Claim: cs[1]}}
	for _, call := range []struct {
		name string
		f    func(context.Context, []duework.Unclaim) ([]error, error)
	}{{"StartClaims", x.StartClaims}, {"Unclaim", x.Unclaim}} {
		if errs, err := call.f(ctx, a); err != nil || !errors.Is(errs[0], duework.ErrClaimStarted) {
			t.Errorf("%s of a claim of the set by another process = %v, %v; want ErrClaimStarted", call.name, errs, err)
		}
	}
	before := st.Capacity()
	if errs, err := x.StartClaims(local, a); err != nil || errs[0] != nil {
		t.Fatalf("StartClaims of a under the set = %v, %v; want it started", errs, err)
	}
	if used := st.Capacity(); used != before {
		t.Errorf("StartClaims of a live claim of the set used %+v units after %+v, want none", used, before)
	}
	if errs, err := x.Unclaim(local, b); err != nil || errs[0] != nil {
		t.Fatalf("Unclaim of b, unstarted, under the set = %v, %v; want it handed back", errs, err)
	}
	if due, err := x.DueBefore(ctx, now, 10); err != nil || len(due) != 1 || due[0].WorkKey != "b" {
		t.Errorf("DueBefore after b's hand-back = %v, %v; want b, visible again", due, err)
	}
}
