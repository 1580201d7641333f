package tenancytest

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rotaworks/rota/tenancy"
)

var entitlementsRules = []rule[*entSubject]{
	{"DefaultFree", "a tenant never given a plan is on PlanFree, without an error", defaultFree},
	{"SetPlan", "Plan returns the plan SetPlan last set, PlanFree included", setPlan},
	{"HostPlans", "any plan that is Valid is the host's to use: Plan returns it exactly as SetPlan was given it, byte for byte — \"enterprise\", names that differ only in case or Unicode normalisation, a name of MaxIDLength bytes", hostPlans},
	{"InvalidPlan", "SetPlan of a plan that is not Valid (an ID that ValidateID refuses) is ErrInvalidPlan and changes nothing", invalidPlan},
	{"CrossTenant", "one tenant's SetPlan never shows in another tenant's Plan", entCrossTenant},
	{"SetPlans", "SetPlans puts each tenant on its plan as SetPlan would, many in one call, leaving the others alone; one invalid user ID (ErrInvalidID) or plan (ErrInvalidPlan) refuses the call, naming the tenant, and changes nothing", setPlans},
	{"NoTenant", noTenantRule, noTenant[*entSubject]},
	{"DoneContext", doneContextRule, doneContext[*entSubject]},
	{"Concurrent", "tenants setting plans at once each end on the plan they set last", entConcurrent},
	{"StateMachine", entModelRule, entModel},
}

// wantPlan fails unless tc is on plan p.
func (s *suite[S]) wantPlan(e tenancy.Entitlements, tc tenancy.Context, p tenancy.PlanID) {
	s.t.Helper()
	if got, err := e.Plan(bg, tc); err != nil || got != p {
		s.errorf("Plan(%s) = %q, %v; want %q", tc.UserID(), got, err, p)
	}
}

func (s *suite[S]) setPlan(e SettableEntitlements, tc tenancy.Context, p tenancy.PlanID) {
	s.t.Helper()
	if err := e.SetPlan(bg, tc, p); err != nil {
		s.fatalf("SetPlan(%s, %q): %v", tc.UserID(), p, err)
	}
}

func defaultFree(s *suite[*entSubject]) {
	s.wantPlan(s.x.e, tenant(s.t, "alice"), tenancy.PlanFree)
	s.setPlan(s.x.e, tenant(s.t, "bob"), "pro")
	s.wantPlan(s.x.e, tenant(s.t, "alice"), tenancy.PlanFree)
}

func setPlan(s *suite[*entSubject]) {
	a := tenant(s.t, "alice")
	for _, p := range []tenancy.PlanID{"plus", "pro", tenancy.PlanFree, "pro"} {
		s.setPlan(s.x.e, a, p)
		s.wantPlan(s.x.e, a, p)
	}
}

// anyPlans are a host's own plans and names a careless store would fold into one another.
var anyPlans = []tenancy.PlanID{
	"enterprise", "Pro", "PRO", "pro", "team plan", "équipe", "e\u0301quipe", "gold/annual", "a_c", "abc", "50%", "it's",
	tenancy.PlanID(longestID),
}

func hostPlans(s *suite[*entSubject]) {
	users := make([]tenancy.Context, len(anyPlans))
	for i, p := range anyPlans {
		users[i] = tenant(s.t, fmt.Sprintf("u%02d", i))
		s.setPlan(s.x.e, users[i], p)
	}
	for i, p := range anyPlans {
		s.wantPlan(s.x.e, users[i], p)
	}
	// One tenant moved through them all, then back to the examples' plans and off them.
	a := tenant(s.t, "alice")
	for _, p := range append(slices.Clone(anyPlans), "pro", "enterprise", tenancy.PlanFree, "enterprise") {
		s.setPlan(s.x.e, a, p)
		s.wantPlan(s.x.e, a, p)
	}
}

func invalidPlan(s *suite[*entSubject]) {
	a, before := s.seeded()
	for _, b := range badIDs {
		p := tenancy.PlanID(b.id)
		if err := s.x.e.SetPlan(bg, a, p); !errors.Is(err, tenancy.ErrInvalidPlan) {
			s.errorf("SetPlan(%s %q) = %v, want ErrInvalidPlan", b.reason, p, err)
		}
	}
	s.unchanged("refused SetPlans", before, a)
}

func entCrossTenant(s *suite[*entSubject]) {
	for _, p := range tenantPairs {
		x := s.fresh().e
		a, b := tenant(s.t, p.a), tenant(s.t, p.b)
		s.setPlan(x, a, "pro")
		s.wantPlan(x, b, tenancy.PlanFree)
		s.setPlan(x, b, "plus")
		s.wantPlan(x, a, "pro")
		s.wantPlan(x, b, "plus")
		s.setPlan(x, b, tenancy.PlanFree)
		s.wantPlan(x, a, "pro")
		s.setPlan(x, a, "enterprise")
		s.wantPlan(x, b, tenancy.PlanFree)
		s.wantPlan(x, a, "enterprise")
	}
}

func entConcurrent(s *suite[*entSubject]) {
	plans := []tenancy.PlanID{tenancy.PlanFree, "plus", "pro"}
	var wg sync.WaitGroup
	for u := range 4 {
		tc := tenant(s.t, fmt.Sprintf("u%d", u))
		wg.Go(func() {
			for i := range 30 {
				if err := s.x.e.SetPlan(bg, tc, plans[(u+i)%3]); err != nil {
					s.errorf("SetPlan(%s): %v", tc.UserID(), err)
					return
				}
				if _, err := s.x.e.Plan(bg, tc); err != nil {
					s.errorf("Plan(%s): %v", tc.UserID(), err)
				}
			}
		})
	}
	wg.Wait()
	for u := range 4 {
		s.wantPlan(s.x.e, tenant(s.t, fmt.Sprintf("u%d", u)), plans[(u+29)%3])
	}
}

func setPlans(s *suite[*entSubject]) {
	a, b, c := tenant(s.t, "alice"), tenant(s.t, "bob"), tenant(s.t, "carol")
	s.setPlan(s.x.e, c, "team")
	plans := map[string]tenancy.PlanID{"alice": "pro", "bob": "enterprise", "dave": tenancy.PlanFree}
	for i := range 300 {
		plans[fmt.Sprintf("seed%03d", i)] = "pro"
	}
	if err := s.x.e.SetPlans(bg, plans); err != nil {
		s.fatalf("SetPlans: %v", err)
	}
	s.wantPlan(s.x.e, a, "pro")
	s.wantPlan(s.x.e, b, "enterprise")
	s.wantPlan(s.x.e, c, "team")
	s.wantPlan(s.x.e, tenant(s.t, "seed299"), "pro")
	for _, bad := range []map[string]tenancy.PlanID{
		{"alice": tenancy.PlanFree, "bad\nuser": "pro", "bob": tenancy.PlanFree},
		{"alice": tenancy.PlanFree, "bob": "bad\x00plan", "zed": tenancy.PlanFree},
		{"alice": tenancy.PlanFree, "": "pro"},
	} {
		err := s.x.e.SetPlans(bg, bad)
		if !errors.Is(err, tenancy.ErrInvalidID) && !errors.Is(err, tenancy.ErrInvalidPlan) {
			s.errorf("SetPlans(%q) = %v, want ErrInvalidID or ErrInvalidPlan", bad, err)
		}
		s.wantPlan(s.x.e, a, "pro")
		s.wantPlan(s.x.e, b, "enterprise")
		s.wantPlan(s.x.e, tenant(s.t, "zed"), tenancy.PlanFree)
	}
	if err := s.x.e.SetPlans(bg, nil); err != nil {
		s.errorf("SetPlans(nil) = %v, want nil", err)
	}
}
