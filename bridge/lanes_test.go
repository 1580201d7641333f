package bridge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// configured are the lanes of the dispatch.Config the tests' LaneFor is for.
var configured = []dispatch.LaneCapacity{
	{Lane: "paid", PerUserLimit: 1, PerCycleLimit: 1},
	{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1},
}

func planTable() map[tenancy.PlanID]dispatch.Lane {
	return map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "free", "plus": "paid", "pro": "paid"}
}

func entitlements(t testing.TB, plans map[string]tenancy.PlanID) *tenancy.MemoryEntitlements {
	t.Helper()
	ent := tenancy.NewMemoryEntitlements()
	for user, p := range plans {
		if err := ent.SetPlan(context.Background(), mustTC(t, user), p); err != nil {
			t.Fatal(err)
		}
	}
	return ent
}

func TestPlanLanesRoutesByPlan(t *testing.T) {
	ent := entitlements(t, map[string]tenancy.PlanID{"p": "plus", "q": "pro", "f": tenancy.PlanFree})
	table := planTable()
	laneFor, err := bridge.PlanLanes(ent, table, configured)
	if err != nil {
		t.Fatal(err)
	}
	table[tenancy.PlanFree] = "changed" // the table was copied
	for user, want := range map[string]dispatch.Lane{"p": "paid", "q": "paid", "f": "free", "never-set": "free"} {
		got, err := laneFor(context.Background(), user)
		if err != nil || got != want {
			t.Errorf("LaneFor(%q) = %q, %v; want %q", user, got, err, want)
		}
	}
}

func TestPlanLanesUnmappedPlanIsAnErrorNamingIt(t *testing.T) {
	ent := entitlements(t, map[string]tenancy.PlanID{"q": "pro"})
	laneFor, err := bridge.PlanLanes(ent, map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "free"}, configured)
	if err != nil {
		t.Fatal(err)
	}
	_, err = laneFor(context.Background(), "q")
	if !errors.Is(err, bridge.ErrUnmappedPlan) || !strings.Contains(err.Error(), `"pro"`) || !strings.Contains(err.Error(), `"q"`) {
		t.Fatalf("err = %v, want ErrUnmappedPlan naming plan pro and user q", err)
	}
}

type failingEntitlements struct{}

func (failingEntitlements) Plan(context.Context, tenancy.Context) (tenancy.PlanID, error) {
	return "", errBoom
}

func TestPlanLanesErrors(t *testing.T) {
	laneFor, err := bridge.PlanLanes(failingEntitlements{}, planTable(), configured)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := laneFor(context.Background(), "u1"); !errors.Is(err, errBoom) {
		t.Errorf("failing entitlements: err = %v", err)
	}
	if _, err := laneFor(context.Background(), ""); !errors.Is(err, tenancy.ErrInvalidID) {
		t.Errorf("empty user ID: err = %v, want ErrInvalidID", err)
	}
	if _, err := laneFor(context.Background(), "a\nb"); !errors.Is(err, tenancy.ErrInvalidID) {
		t.Errorf("control character in user ID: err = %v, want ErrInvalidID", err)
	}

	for _, tc := range []struct {
		name, want string
		ent        tenancy.Entitlements
		table      map[tenancy.PlanID]dispatch.Lane
	}{
		{"nil entitlements", "Entitlements", nil, planTable()},
		{"empty table", "empty", tenancy.NewMemoryEntitlements(), nil},
		{"empty lane", `plan "plus" maps to lane ""`, tenancy.NewMemoryEntitlements(), map[tenancy.PlanID]dispatch.Lane{"plus": ""}},
		{"unknown lane", `plan "pro" maps to lane "gold", which is not one of the configured lanes ["paid" "free"]`,
			tenancy.NewMemoryEntitlements(), map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "free", "pro": "gold"}},
	} {
		laneFor, err := bridge.PlanLanes(tc.ent, tc.table, configured)
		if laneFor != nil || !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PlanLanes err = %v, want ErrInvalidConfig naming %s", tc.name, err, tc.want)
		}
	}
	if _, err := bridge.PlanLanes(tenancy.NewMemoryEntitlements(), planTable(), nil); !errors.Is(err, bridge.ErrInvalidConfig) {
		t.Errorf("PlanLanes with no configured lanes: err = %v, want ErrInvalidConfig", err)
	}
}

// FuzzPlanLanes checks that any user ID either routes to a lane of the table or is refused
// with ErrInvalidID, and never panics.
func FuzzPlanLanes(f *testing.F) {
	for _, s := range []string{"u1", "", "a\x00b", "\xff", strings.Repeat("x", 300), "ünï"} {
		f.Add(s)
	}
	laneFor, err := bridge.PlanLanes(tenancy.NewMemoryEntitlements(), planTable(), configured)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, user string) {
		lane, err := laneFor(context.Background(), user)
		switch {
		case err == nil && lane != "free":
			t.Fatalf("LaneFor(%q) = %q, want free", user, lane)
		case err != nil && !errors.Is(err, tenancy.ErrInvalidID):
			t.Fatalf("LaneFor(%q) err = %v, want ErrInvalidID", user, err)
		case err != nil && tenancy.ValidateID("user", user) == nil:
			t.Fatalf("LaneFor(%q) refused a valid ID: %v", user, err)
		}
	})
}

// planOf is an Entitlements of the host's own plans, whatever their names.
type planOf map[string]tenancy.PlanID

func (p planOf) Plan(_ context.Context, tc tenancy.Context) (tenancy.PlanID, error) {
	return p[tc.UserID()], nil
}

func TestPlanLimitsGivesEachTenantItsPlansLimits(t *testing.T) {
	team := duework.Limits{Weight: 5, MaxInFlight: 2, Every: time.Second, Burst: 10}
	table := map[tenancy.PlanID]duework.Limits{"team": team, "solo": {MaxInFlight: 1}}
	limitsFor, err := bridge.PlanLimits(planOf{"t": "team", "s": "solo", "x": "enterprise"}, table)
	if err != nil {
		t.Fatal(err)
	}
	table["team"] = duework.Limits{} // the table was copied
	for user, want := range map[string]duework.Limits{"t": team, "s": {MaxInFlight: 1}} {
		if got, err := limitsFor(context.Background(), user); err != nil || got != want {
			t.Errorf("LimitsFor(%q) = %+v, %v; want %+v", user, got, err, want)
		}
	}
	_, err = limitsFor(context.Background(), "x")
	if !errors.Is(err, bridge.ErrUnmappedPlan) || !strings.Contains(err.Error(), `"enterprise"`) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("a plan the table lacks: err = %v, want ErrUnmappedPlan naming plan enterprise and user x", err)
	}
	if _, err := limitsFor(context.Background(), "a\nb"); !errors.Is(err, tenancy.ErrInvalidID) {
		t.Errorf("invalid user ID: err = %v, want ErrInvalidID", err)
	}
	failing, err := bridge.PlanLimits(failingEntitlements{}, table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failing(context.Background(), "u1"); !errors.Is(err, errBoom) {
		t.Errorf("failing entitlements: err = %v", err)
	}
}

func TestPlanLimitsRefusesBadTables(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		plans      tenancy.Entitlements
		table      map[tenancy.PlanID]duework.Limits
	}{
		{"nil entitlements", "Entitlements must not be nil", nil, map[tenancy.PlanID]duework.Limits{"free": {}}},
		{"empty table", "plan table must not be empty", tenancy.NewMemoryEntitlements(), nil},
		{"negative in-flight cap", `plan "team": duework: invalid input: Limits.MaxInFlight`, tenancy.NewMemoryEntitlements(),
			map[tenancy.PlanID]duework.Limits{"free": {}, "team": {MaxInFlight: -1}}},
		{"weight beyond the most", `plan "big": duework: invalid input: Limits.Weight`, tenancy.NewMemoryEntitlements(),
			map[tenancy.PlanID]duework.Limits{"big": {Weight: duework.MaxWeight + 1}}},
	} {
		limitsFor, err := bridge.PlanLimits(tc.plans, tc.table)
		if limitsFor != nil || !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PlanLimits = %v; want ErrInvalidConfig saying %s", tc.name, err, tc.want)
		}
	}
}

// TestPlanLimitsWiresIntoTheDispatcher: a Dispatcher given PlanLimits stores each
// tenant's limits with its lane, and a tenant whose plan has no limits is unrouted.
func TestPlanLimitsWiresIntoTheDispatcher(t *testing.T) {
	idx := duework.NewMemory()
	plans := planOf{"t": "team", "x": "enterprise"}
	lanes := []dispatch.LaneCapacity{{Lane: "paid", PerUserLimit: 5, PerCycleLimit: 10}}
	laneFor, err := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{"team": "paid", "enterprise": "paid"}, lanes)
	if err != nil {
		t.Fatal(err)
	}
	limitsFor, err := bridge.PlanLimits(plans, map[tenancy.PlanID]duework.Limits{"team": {MaxInFlight: 2}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 10, LaneFor: laneFor, LimitsFor: limitsFor, ClaimFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"t", "x"} {
		for _, k := range []string{"a", "b", "c"} {
			schedule(t, idx, duework.Entry{UserID: u, WorkKey: k, DueAt: t0})
		}
	}
	b, err := d.Dispatch(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := idx.User(context.Background(), "t", t0)
	if err != nil || st.Group != "paid" || st.Limits.MaxInFlight != 2 || st.InFlight != 2 {
		t.Errorf("t's stored state: %+v, %v; want lane paid, MaxInFlight 2 and two items in flight", st, err)
	}
	if len(b.Unrouted) != 1 || b.Unrouted[0].UserID != "x" || !errors.Is(b.Unrouted[0].Err, bridge.ErrUnmappedPlan) {
		t.Errorf("unrouted %+v, want x, whose plan has no limits", b.Unrouted)
	}
}

func TestPlanLimitsRefusesABurstWithoutARate(t *testing.T) {
	_, err := bridge.PlanLimits(tenancy.NewMemoryEntitlements(), map[tenancy.PlanID]duework.Limits{"team": {Burst: 5}})
	if !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), `plan "team": Limits.Burst 5 without a rate`) {
		t.Fatalf("PlanLimits(Burst without Every) = %v, want ErrInvalidConfig naming the plan and the field", err)
	}
}

func TestPlanTiersGivesEachTenantItsPlansTier(t *testing.T) {
	ent := entitlements(t, map[string]tenancy.PlanID{"p": "pro", "f": "free"})
	table := map[tenancy.PlanID]string{"pro": "hot", "free": "cold"}
	tierFor, err := bridge.PlanTiers(ent, table, nil)
	if err != nil {
		t.Fatal(err)
	}
	table["pro"] = "warm" // the table was copied
	for user, want := range map[string]string{"p": "hot", "f": "cold", "never-set": "cold"} {
		if got, err := tierFor(context.Background(), mustTC(t, user)); err != nil || got != want {
			t.Errorf("TierFor(%q) = %q, %v; want %q", user, got, err, want)
		}
	}
	ent = entitlements(t, map[string]tenancy.PlanID{"x": "enterprise"})
	tierFor, _ = bridge.PlanTiers(ent, map[tenancy.PlanID]string{"free": "cold"}, nil)
	if _, err := tierFor(context.Background(), mustTC(t, "x")); !errors.Is(err, bridge.ErrUnmappedPlan) || !strings.Contains(err.Error(), `"enterprise"`) {
		t.Errorf("TierFor of an unmapped plan = %v, want ErrUnmappedPlan naming it", err)
	}
}

func TestPlanTiersRefusesBadTables(t *testing.T) {
	own := cadence.NewRegistry()
	if err := own.Register("fortnightly", cadence.Backoff{Base: 14 * 24 * time.Hour, Max: 28 * 24 * time.Hour, Factor: 2}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		plans      tenancy.Entitlements
		table      map[tenancy.PlanID]string
		tiers      *cadence.Registry
	}{
		{"nil entitlements", "Entitlements must not be nil", nil, map[tenancy.PlanID]string{"free": "hot"}, nil},
		{"empty table", "plan table must not be empty", tenancy.NewMemoryEntitlements(), nil, nil},
		{"unknown tier", `plan "free"`, tenancy.NewMemoryEntitlements(), map[tenancy.PlanID]string{"free": "fortnightly"}, nil},
	} {
		tierFor, err := bridge.PlanTiers(tc.plans, tc.table, tc.tiers)
		if tierFor != nil || !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PlanTiers = %v; want ErrInvalidConfig saying %s", tc.name, err, tc.want)
		}
	}
	if _, err := bridge.PlanTiers(tenancy.NewMemoryEntitlements(), map[tenancy.PlanID]string{"free": "fortnightly"}, own); err != nil {
		t.Errorf("PlanTiers with the host's own tier in its registry = %v, want it taken", err)
	}
}
