package tenancytest

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/tenancy"
)

const (
	keyedModelRule = "over any sequence of calls by several tenants, the store agrees with a reference model: a map per tenant"
	entModelRule   = "over any sequence of calls by several tenants, Plan agrees with a reference model: a map, PlanFree when absent"
)

// Tenants and IDs of the state machines: "a" and "a/b" meet under a "/" join of user and
// ID, "a" and "A" under a case-insensitive comparison; "x " and "" are bad IDs.
var (
	genUser  = rapid.SampledFrom([]string{"a", "a/b", "A"})
	genID    = rapid.SampledFrom([]string{"x", "b/x", "a/b", "x ", ""})
	genValue = rapid.SampledFrom([]string{"hot", "cold"})
	// genLookupUser is genUser or "", the zero Context.
	genLookupUser = rapid.SampledFrom([]string{"a", "a/b", "A", ""})
)

// modelFail fails t citing rule.
func modelFail(t *rapid.T, rule, format string, args ...any) {
	t.Helper()
	t.Fatalf("rule %q broken: %s", rule, fmt.Sprintf(format, args...))
}

// keyedModel drives fresh stores and a map per tenant with the same random calls — for a
// Watchlist, GetMany, AddMany and Tenants too — and after every call checks every tenant's
// List against the map.
func keyedModel[S keyed](s *suite[S]) {
	rapid.Check(s.t, func(t *rapid.T) {
		x := s.fresh()
		field := x.field()
		m := map[string]map[string]string{}
		check := func(t *rapid.T, call, user, id string, err error, ok bool) bool {
			t.Helper()
			switch {
			case tenancy.ValidateID(field, id) != nil:
				if !errors.Is(err, tenancy.ErrInvalidID) {
					modelFail(t, s.rule, "%s(%s, %q) = %v, want ErrInvalidID", call, user, id, err)
				}
				return false
			case !ok:
				if !errors.Is(err, tenancy.ErrNotFound) {
					modelFail(t, s.rule, "%s(%s, %q) = %v, want ErrNotFound: the model has no such row", call, user, id, err)
				}
				return false
			case err != nil:
				modelFail(t, s.rule, "%s(%s, %q) = %v", call, user, id, err)
			}
			return true
		}
		actions := map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				u, id, v := genUser.Draw(t, "user"), genID.Draw(t, "id"), genValue.Draw(t, "value")
				if check(t, "put", u, id, x.put(bg, tenant(t, u), id, v), true) {
					if m[u] == nil {
						m[u] = map[string]string{}
					}
					m[u][id] = v
				}
			},
			"get": func(t *rapid.T) {
				u, id := genUser.Draw(t, "user"), genID.Draw(t, "id")
				got, err := x.get(bg, tenant(t, u), id)
				want, ok := m[u][id]
				if check(t, "get", u, id, err, ok) && got != want {
					modelFail(t, s.rule, "get(%s, %q) = %q, the model has %q", u, id, got, want)
				}
			},
			"remove": func(t *rapid.T) {
				u, id := genUser.Draw(t, "user"), genID.Draw(t, "id")
				_, ok := m[u][id]
				if check(t, "remove", u, id, x.del(bg, tenant(t, u), id), ok) {
					delete(m[u], id)
				}
			},
			"": func(t *rapid.T) {
				for _, u := range []string{"a", "a/b", "A"} {
					got, err := x.list(bg, tenant(t, u))
					if err != nil {
						modelFail(t, s.rule, "List(%s): %v", u, err)
					}
					want := []kv{}
					for id, v := range m[u] {
						want = append(want, kv{id, v})
					}
					sort.Slice(want, func(i, j int) bool { return want[i].id < want[j].id })
					if !slices.Equal(got, want) {
						modelFail(t, s.rule, "List(%s) = %v, the model has %v", u, got, want)
					}
				}
			},
		}
		if w, ok := any(x).(watchKeyed); ok {
			actions["getMany"] = func(t *rapid.T) { s.modelGetMany(t, w, m, check) }
			actions["putMany"] = func(t *rapid.T) { s.modelPutMany(t, w, m) }
			actions["tenants"] = func(t *rapid.T) { s.modelTenants(t, w, m) }
		}
		t.Repeat(actions)
	})
}

// modelGetMany reads random lookups, zero Contexts among them, in one getMany and checks
// each outcome as keyedModel's check does a get's, against the model m.
func (s *suite[S]) modelGetMany(t *rapid.T, b watchKeyed, m map[string]map[string]string, check func(t *rapid.T, call, user, id string, err error, ok bool) bool) {
	users := rapid.SliceOfN(genLookupUser, 0, 5).Draw(t, "users")
	lookups := make([]tenancy.Lookup, len(users))
	for i, u := range users {
		lookups[i].Slug = genID.Draw(t, "id")
		if u != "" {
			lookups[i].Tenant = tenant(t, u)
		}
	}
	vs, errs, err := b.getMany(bg, lookups)
	if err != nil {
		modelFail(t, s.rule, "getMany(%v): %v", lookups, err)
	}
	for i, u := range users {
		id := lookups[i].Slug
		if u == "" {
			if !errors.Is(errs[i], tenancy.ErrNoTenant) {
				modelFail(t, s.rule, "getMany's lookup %d (zero Context, %q) = %v, want ErrNoTenant", i, id, errs[i])
			}
			continue
		}
		want, ok := m[u][id]
		if check(t, fmt.Sprintf("getMany's lookup %d", i), u, id, errs[i], ok) && vs[i] != want {
			modelFail(t, s.rule, "getMany's lookup %d (%s, %q) = %q, the model has %q", i, u, id, vs[i], want)
		}
	}
}

// modelPutMany writes a random batch for one tenant, a slug given twice or a bad one among
// them at times: a batch holding a bad slug is ErrInvalidID and writes nothing, any other
// writes every row, the last of a slug winning.
func (s *suite[S]) modelPutMany(t *rapid.T, w watchKeyed, m map[string]map[string]string) {
	u := genUser.Draw(t, "user")
	n := rapid.IntRange(0, 4).Draw(t, "n")
	rows := make([]kv, n)
	bad := -1
	for i := range rows {
		rows[i] = kv{genID.Draw(t, "id"), genValue.Draw(t, "value")}
		if bad < 0 && tenancy.ValidateID("slug", rows[i].id) != nil {
			bad = i
		}
	}
	err := w.putMany(bg, tenant(t, u), rows)
	switch {
	case bad >= 0:
		if !errors.Is(err, tenancy.ErrInvalidID) {
			modelFail(t, s.rule, "putMany(%s, %v) = %v, want ErrInvalidID for row %d", u, rows, err, bad)
		}
	case err != nil:
		modelFail(t, s.rule, "putMany(%s, %v) = %v", u, rows, err)
	default:
		for _, r := range rows {
			if m[u] == nil {
				m[u] = map[string]string{}
			}
			m[u][r.id] = r.v
		}
	}
}

// modelTenants reads one page of Tenants after a random ID, or from the start, and checks
// it against the users the model holds rows for.
func (s *suite[S]) modelTenants(t *rapid.T, w watchKeyed, m map[string]map[string]string) {
	after := rapid.SampledFrom([]string{"", "a", "A", "a/b", "B", "a0"}).Draw(t, "after")
	limit := rapid.IntRange(1, 4).Draw(t, "limit")
	got, err := w.tenants(bg, after, limit)
	if err != nil {
		modelFail(t, s.rule, "Tenants(%q, %d): %v", after, limit, err)
	}
	want := []string{}
	for u, rows := range m {
		if len(rows) > 0 && u > after {
			want = append(want, u)
		}
	}
	slices.Sort(want)
	want = want[:min(limit, len(want))]
	if !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
		modelFail(t, s.rule, "Tenants(%q, %d) = %q, the model has %q", after, limit, got, want)
	}
}

// entModel drives fresh Entitlements and a map with the same random calls, and after every
// call checks every tenant's Plan against the map.
func entModel(s *suite[*entSubject]) {
	genPlan := rapid.SampledFrom([]tenancy.PlanID{tenancy.PlanFree, "plus", "pro", "Pro", "enterprise", "", "pro ", "gold\x00"})
	rapid.Check(s.t, func(t *rapid.T) {
		x := s.fresh().e
		m := map[string]tenancy.PlanID{}
		want := func(u string) tenancy.PlanID {
			if p, ok := m[u]; ok {
				return p
			}
			return tenancy.PlanFree
		}
		t.Repeat(map[string]func(*rapid.T){
			"SetPlan": func(t *rapid.T) {
				u, p := genUser.Draw(t, "user"), genPlan.Draw(t, "plan")
				err := x.SetPlan(bg, tenant(t, u), p)
				switch {
				case p.Check() != nil:
					if !errors.Is(err, tenancy.ErrInvalidPlan) {
						modelFail(t, s.rule, "SetPlan(%s, %q) = %v, want ErrInvalidPlan", u, p, err)
					}
				case err != nil:
					modelFail(t, s.rule, "SetPlan(%s, %q) = %v", u, p, err)
				default:
					m[u] = p
				}
			},
			"": func(t *rapid.T) {
				for _, u := range []string{"a", "a/b", "A"} {
					if got, err := x.Plan(bg, tenant(t, u)); err != nil || got != want(u) {
						modelFail(t, s.rule, "Plan(%s) = %q, %v; the model has %q", u, got, err, want(u))
					}
				}
			},
		})
	})
}
