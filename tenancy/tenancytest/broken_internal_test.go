package tenancytest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// recorder is a rapid.TB that records failures instead of failing the test; Fatalf and
// FailNow end the goroutine like testing.T's do.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Name() string              { return "recorder" }
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Log(...any)                {}
func (r *recorder) Skipf(string, ...any)      { runtime.Goexit() }
func (r *recorder) Skip(...any)               { runtime.Goexit() }
func (r *recorder) SkipNow()                  { runtime.Goexit() }
func (r *recorder) Error(args ...any)         { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recorder) Fatal(args ...any)         { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *recorder) FailNow()                  { r.Fatalf("FailNow") }
func (r *recorder) Fail()                     { r.Errorf("Fail") }
func (r *recorder) Failed() bool              { r.mu.Lock(); defer r.mu.Unlock(); return len(r.msgs) > 0 }
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// runRule runs one rule's check against fresh subjects from newSubject and returns its
// failure messages.
func runRule[S subject](r rule[S], newSubject func() S) []string {
	rec := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.check(&suite[S]{t: rec, x: newSubject(), rule: r.text, fresh: newSubject})
	}()
	<-done
	return rec.msgs
}

// fake is a Watchlist, a Repository[string] and an Entitlements written from scratch,
// correct unless its bug says otherwise.
type fake struct {
	bug   string
	mu    sync.Mutex
	rows  map[string]tenancy.WatchlistEntry // by key(user, id); a Repository's value in Tier
	plans map[string]tenancy.PlanID
	lists map[string][]tenancy.WatchlistEntry // the "sharedSlice" bug's cache
	ever  map[string]bool                     // every user that held an entry: the "tenantsKeepsEmpty" bug's list
}

var (
	_ tenancy.Watchlist          = (*fake)(nil)
	_ tenancy.Entitlements       = (*fake)(nil)
	_ SettableEntitlements       = (*fake)(nil)
	_ tenancy.Repository[string] = repo{}
)

func newFake(bug string) *fake {
	return &fake{bug: bug, rows: map[string]tenancy.WatchlistEntry{}, plans: map[string]tenancy.PlanID{},
		lists: map[string][]tenancy.WatchlistEntry{}, ever: map[string]bool{}}
}

func (f *fake) key(user, id string) string {
	switch f.bug {
	case "joinedKey":
		return user + "/" + id
	case "caseFold":
		return strings.ToLower(user) + "\x00" + id
	case "slugOnly":
		return id
	}
	return user + "\x00" + id
}

func (f *fake) check(ctx context.Context, tc tenancy.Context) error {
	if f.bug == "zeroContextLists" && tc.Check() != nil {
		return nil
	}
	if err := tc.Check(); err != nil {
		return err
	}
	if f.bug == "ignoresCtx" {
		return nil
	}
	return ctx.Err()
}

func (f *fake) validateID(field, id string) error {
	if f.bug == "looseIDs" && strings.TrimSpace(id) != "" {
		return nil
	}
	return tenancy.ValidateID(field, id)
}

func (f *fake) notFound(field, id string) error {
	if f.bug == "tellingNotFound" {
		for _, e := range f.rows {
			if e.Slug == id {
				return fmt.Errorf("%w: %s %q belongs to someone else", tenancy.ErrNotFound, field, id)
			}
		}
	}
	return fmt.Errorf("%w: %s %q", tenancy.ErrNotFound, field, id)
}

func (f *fake) Add(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) error {
	if err := f.check(ctx, tc); err != nil {
		return err
	}
	if f.bug == "rewritesUser" {
		e.UserID = tc.UserID()
	}
	if f.bug == "noTierCheck" && e.Tier == "" {
		e.Tier = "hot"
	}
	if f.bug == "wrapsTime" {
		e.AddedAt = time.Unix(e.AddedAt.Unix()%(1<<35), 0)
	}
	if err := f.validateID("slug", e.Slug); err != nil {
		return err
	}
	if e.UserID != tc.UserID() {
		return fmt.Errorf("%w: entry names %q", tenancy.ErrForbidden, e.UserID)
	}
	if err := e.Validate(tc); err != nil && f.bug != "looseIDs" {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.rows[f.key(tc.UserID(), e.Slug)]; ok && f.bug == "keepsFirst" {
		return nil
	}
	f.rows[f.key(tc.UserID(), e.Slug)] = e
	f.ever[e.UserID] = true
	delete(f.lists, tc.UserID())
	return nil
}

func (f *fake) AddMany(ctx context.Context, tc tenancy.Context, entries []tenancy.WatchlistEntry) error {
	if err := f.check(ctx, tc); err != nil {
		return err
	}
	var keep []tenancy.WatchlistEntry
	for i, e := range entries {
		if f.bug == "addManyRewritesUser" {
			e.UserID = tc.UserID()
		}
		err := e.Validate(tc)
		switch {
		case err != nil && f.bug == "addManySkipsForbidden" && errors.Is(err, tenancy.ErrForbidden):
			continue
		case err != nil && f.bug == "addManyPartial":
			f.write(tc, keep)
			return fmt.Errorf("entries[%d]: %w", i, err)
		case err != nil && f.bug == "addManyNoIndex":
			return err
		case err != nil:
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
		keep = append(keep, e)
	}
	if f.bug == "addManyFirstWins" {
		seen := map[string]bool{}
		keep = slices.DeleteFunc(keep, func(e tenancy.WatchlistEntry) bool {
			dup := seen[e.Slug]
			seen[e.Slug] = true
			return dup
		})
	}
	f.write(tc, keep)
	return nil
}

func (f *fake) AddAll(ctx context.Context, entries []tenancy.WatchlistEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var keep []tenancy.WatchlistEntry
	for i, e := range entries {
		tc, err := tenancy.NewContext(e.UserID)
		if err == nil {
			err = e.Validate(tc)
		}
		switch {
		case err != nil && f.bug == "addAllPartial":
			f.writeAll(keep)
			return fmt.Errorf("entries[%d]: %w", i, err)
		case err != nil && f.bug == "addAllNoIndex":
			return err
		case err != nil:
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
		keep = append(keep, e)
	}
	if f.bug == "addAllFirstWins" {
		slices.Reverse(keep)
	}
	f.writeAll(keep)
	return nil
}

// writeAll stores entries, each for its own user, in order.
func (f *fake) writeAll(entries []tenancy.WatchlistEntry) {
	for _, e := range entries {
		tc, _ := tenancy.NewContext(e.UserID)
		f.write(tc, []tenancy.WatchlistEntry{e})
	}
}

// write stores entries for tc, in order.
func (f *fake) write(tc tenancy.Context, entries []tenancy.WatchlistEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range entries {
		f.rows[f.key(tc.UserID(), e.Slug)] = e
		f.ever[e.UserID] = true
	}
	delete(f.lists, tc.UserID())
}

func (f *fake) Tenants(ctx context.Context, after string, limit int) ([]string, error) {
	if after != "" && f.bug != "tenantsAfterUnchecked" {
		if err := tenancy.ValidateID("after", after); err != nil {
			return nil, err
		}
	}
	if (limit < 1 || limit > tenancy.MaxTenantsPage) && f.bug != "tenantsLooseLimit" {
		return nil, fmt.Errorf("%w: limit %d", tenancy.ErrInvalidID, limit)
	}
	if err := ctx.Err(); err != nil && f.bug != "tenantsIgnoresCtx" {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	users := map[string]bool{}
	for _, e := range f.rows {
		users[e.UserID] = true
	}
	if f.bug == "tenantsKeepsEmpty" {
		users = f.ever
	}
	var out []string
	for u := range users {
		if u > after || (u == after && f.bug == "tenantsInclusive") {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	switch f.bug {
	case "tenantsFoldsCase":
		// Compared and deduplicated without case, as a citext column would.
		sort.SliceStable(out, func(i, j int) bool { return strings.ToLower(out[i]) < strings.ToLower(out[j]) })
		out = slices.CompactFunc(out, strings.EqualFold)
	case "tenantsTruncates":
		// IDs cut to 64 bytes, as a varchar(64) column would.
		for i, u := range out {
			if len(u) > 64 {
				out[i] = u[:64]
			}
		}
	}
	if len(out) > limit && f.bug != "tenantsNoLimit" && limit > 0 {
		out = out[:limit]
	}
	return out, nil
}

func (f *fake) Get(ctx context.Context, tc tenancy.Context, slug string) (tenancy.WatchlistEntry, error) {
	if err := f.check(ctx, tc); err != nil {
		return tenancy.WatchlistEntry{}, err
	}
	if err := f.validateID("slug", slug); err != nil {
		return tenancy.WatchlistEntry{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.rows[f.key(tc.UserID(), slug)]
	if !ok && f.bug == "getsAnyRow" {
		for k, other := range f.rows {
			if k == f.key(tc.UserID(), other.Slug) {
				return other, nil
			}
		}
	}
	if !ok {
		return e, f.notFound("slug", slug)
	}
	return e, nil
}

func (f *fake) Remove(ctx context.Context, tc tenancy.Context, slug string) error {
	if err := f.check(ctx, tc); err != nil {
		return err
	}
	if err := f.validateID("slug", slug); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.key(tc.UserID(), slug)
	if _, ok := f.rows[k]; !ok && f.bug != "removeAbsentOK" {
		return f.notFound("slug", slug)
	}
	delete(f.rows, k)
	delete(f.lists, tc.UserID())
	return nil
}

func (f *fake) List(ctx context.Context, tc tenancy.Context) ([]tenancy.WatchlistEntry, error) {
	if err := f.check(ctx, tc); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.lists[tc.UserID()]; ok && f.bug == "sharedSlice" {
		return l, nil
	}
	var out []tenancy.WatchlistEntry
	for k, e := range f.rows {
		if k == f.key(tc.UserID(), e.Slug) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	if f.bug == "reversed" {
		slices.Reverse(out)
	}
	f.lists[tc.UserID()] = out
	return out, nil
}

func (f *fake) GetMany(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
	if err := ctx.Err(); err != nil && f.bug != "batchIgnoresCtx" {
		return nil, nil, err
	}
	es, errs := make([]tenancy.WatchlistEntry, len(lookups)), make([]error, len(lookups))
	seen := map[tenancy.Lookup]bool{}
	for i, l := range lookups {
		tc := l.Tenant
		if f.bug == "batchFirstTenant" {
			tc = lookups[0].Tenant // one Context for the whole batch
		}
		if err := tc.Check(); err != nil && f.bug == "batchFailsCall" {
			return nil, nil, err
		}
		es[i], errs[i] = f.Get(context.Background(), tc, l.Slug)
		if errors.Is(errs[i], tenancy.ErrNotFound) && f.bug == "batchLeaks" {
			f.mu.Lock()
			for _, e := range f.rows {
				if e.Slug == l.Slug {
					es[i], errs[i] = e, nil // matched on the slug alone
				}
			}
			f.mu.Unlock()
		}
		if seen[l] && f.bug == "batchOnce" {
			es[i], errs[i] = tenancy.WatchlistEntry{}, f.notFound("slug", l.Slug)
		}
		seen[l] = true
	}
	if f.bug == "batchFoundFirst" {
		// The found entries first, as a join returns them, then the rest.
		sort.SliceStable(es, func(i, j int) bool { return es[i].Slug != "" && es[j].Slug == "" })
		sort.SliceStable(errs, func(i, j int) bool { return errs[i] == nil && errs[j] != nil })
	}
	return es, errs, nil
}

// repo is a fake seen as a Repository[string]: values travel in Tier.
type repo struct{ *fake }

func (r repo) Put(ctx context.Context, tc tenancy.Context, id, v string) error {
	if err := r.check(ctx, tc); err != nil {
		return err
	}
	if err := r.validateID("id", id); err != nil {
		return err
	}
	if r.bug == "truncates" && len(v) > 8 {
		v = v[:8]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.rows[r.key(tc.UserID(), id)]; ok && r.bug == "keepsFirst" {
		return nil
	}
	r.rows[r.key(tc.UserID(), id)] = tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: id, Tier: v}
	return nil
}

func (r repo) Get(ctx context.Context, tc tenancy.Context, id string) (string, error) {
	e, err := r.fake.Get(ctx, tc, id)
	return e.Tier, err
}

func (r repo) Delete(ctx context.Context, tc tenancy.Context, id string) error {
	return r.fake.Remove(ctx, tc, id)
}

func (r repo) List(ctx context.Context, tc tenancy.Context) ([]string, error) {
	es, err := r.fake.List(ctx, tc)
	var out []string
	for _, e := range es {
		out = append(out, e.Tier)
	}
	return out, err
}

func (f *fake) SetPlans(ctx context.Context, plans map[string]tenancy.PlanID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	users := slices.Sorted(maps.Keys(plans))
	for _, u := range users {
		err := tenancy.ValidateID("user ID", u)
		if err == nil && plans[u].Check() != nil {
			err = fmt.Errorf("%w: tenant %q: %q", tenancy.ErrInvalidPlan, u, plans[u])
		}
		if err != nil {
			if f.bug != "setPlansPartial" {
				return err
			}
			users = users[:slices.Index(users, u)]
			defer func() { _ = f.setAll(users, plans) }()
			return err
		}
	}
	return f.setAll(users, plans)
}

// setAll sets each of users on its plan in plans.
func (f *fake) setAll(users []string, plans map[string]tenancy.PlanID) error {
	for _, u := range users {
		tc, _ := tenancy.NewContext(u)
		if err := f.SetPlan(context.Background(), tc, plans[u]); err != nil {
			return err
		}
	}
	return nil
}

func (f *fake) SetPlan(ctx context.Context, tc tenancy.Context, p tenancy.PlanID) error {
	if err := f.check(ctx, tc); err != nil {
		return err
	}
	if p.Check() != nil && f.bug != "anyPlan" {
		return fmt.Errorf("%w: %q", tenancy.ErrInvalidPlan, p)
	}
	switch f.bug {
	case "threePlans":
		// The plans of an earlier release only, as a CHECK constraint would allow.
		if p != tenancy.PlanFree && p != "plus" && p != "pro" {
			return fmt.Errorf("%w: plan %q is not one of free, plus, pro", tenancy.ErrInvalidPlan, p)
		}
	case "foldsPlanCase":
		p = tenancy.PlanID(strings.ToLower(string(p)))
	case "truncatesPlan":
		if len(p) > 64 {
			p = p[:64]
		}
	}
	if p == tenancy.PlanFree && f.bug == "ignoresFree" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans[f.key(tc.UserID(), "")] = p
	return nil
}

func (f *fake) Plan(ctx context.Context, tc tenancy.Context) (tenancy.PlanID, error) {
	if err := f.check(ctx, tc); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.plans[f.key(tc.UserID(), "")]; ok {
		return p, nil
	}
	if f.bug == "defaultPlus" {
		return "plus", nil
	}
	return tenancy.PlanFree, nil
}

func init() {
	// A broken implementation fails rapid's checks on purpose: keep rapid from writing
	// failure files for them.
	if fl := flag.Lookup("rapid.nofailfile"); fl != nil {
		_ = fl.Value.Set("true")
	}
}

// catches checks that each rule passes the correct fake and fails each fake whose bug
// breaks it, citing the rule.
func catches[S subject](t *testing.T, iface string, rules []rule[S], wrap func(*fake) S, bugs map[string][]string) {
	t.Helper()
	byName := map[string]rule[S]{}
	for _, r := range rules {
		byName[r.name] = r
		if msgs := runRule(r, func() S { return wrap(newFake("")) }); len(msgs) > 0 {
			t.Errorf("%s/%s fails on a correct implementation: %s", iface, r.name, strings.Join(msgs, "\n"))
		}
	}
	for bug, names := range bugs {
		for _, name := range names {
			r, ok := byName[name]
			if !ok {
				t.Fatalf("no rule %s/%s", iface, name)
			}
			msgs := runRule(r, func() S { return wrap(newFake(bug)) })
			if len(msgs) == 0 {
				t.Errorf("%s/%s passed an implementation with the bug %q", iface, name, bug)
				continue
			}
			if cite := fmt.Sprintf("rule %q broken", r.text); !strings.Contains(strings.Join(msgs, "\n"), cite) {
				t.Errorf("%s/%s: the failure %q does not cite the rule", iface, name, msgs[0])
			}
		}
	}
}

func TestSuiteCatchesBrokenWatchlists(t *testing.T) {
	if testing.Short() {
		t.Skip("-short shortens rapid's state-machine sequences, and this test needs them at full length")
	}
	catches(t, "Watchlist", watchlistRules, func(f *fake) *watchSubject { return &watchSubject{w: f} }, map[string][]string{
		"joinedKey":        {"CrossTenant", "SharedSlugs", "GetManyCrossTenant"},
		"caseFold":         {"CrossTenant", "SharedSlugs", "GetManyCrossTenant", "StateMachine"},
		"slugOnly":         {"CrossTenant", "SharedSlugs", "GetMany", "GetManyCrossTenant", "StateMachine"},
		"tellingNotFound":  {"CrossTenant"},
		"rewritesUser":     {"Forbidden", "CrossTenant"},
		"noTierCheck":      {"BadTier"},
		"wrapsTime":        {"AddedAtRange", "AddGet"},
		"keepsFirst":       {"AddReplaces", "StateMachine"},
		"getsAnyRow":       {"GetAbsent", "StateMachine"},
		"looseIDs":         {"BadIDs", "StateMachine"},
		"zeroContextLists": {"NoTenant"},
		"ignoresCtx":       {"DoneContext"},
		"removeAbsentOK":   {"Remove", "StateMachine"},
		"reversed":         {"ListOrder", "StateMachine"},
		"sharedSlice":      {"ListOrder"},
		"batchLeaks":       {"GetMany", "GetManyCrossTenant", "StateMachine"},
		"batchFirstTenant": {"GetMany", "GetManyCrossTenant", "StateMachine"},
		"batchFailsCall":   {"GetMany", "StateMachine"},
		"batchOnce":        {"GetMany", "StateMachine"},
		"batchFoundFirst":  {"GetMany", "StateMachine"},
		"batchIgnoresCtx":  {"GetManyDoneContext"},

		"addManyPartial":        {"AddManyAllOrNothing", "BadIDs", "StateMachine"},
		"addManyNoIndex":        {"AddManyAllOrNothing"},
		"addManyFirstWins":      {"AddManyDuplicates", "StateMachine"},
		"addManyRewritesUser":   {"AddManyCrossTenant", "AddManyAllOrNothing"},
		"addManySkipsForbidden": {"AddManyCrossTenant", "AddManyAllOrNothing"},

		"addAllPartial":   {"AddAllAllOrNothing"},
		"addAllNoIndex":   {"AddAllAllOrNothing"},
		"addAllFirstWins": {"AddAll"},

		"tenantsInclusive":      {"Tenants", "StateMachine"},
		"tenantsNoLimit":        {"Tenants", "StateMachine"},
		"tenantsFoldsCase":      {"Tenants", "StateMachine"},
		"tenantsTruncates":      {"Tenants"},
		"tenantsLooseLimit":     {"TenantsBounds"},
		"tenantsAfterUnchecked": {"TenantsBounds"},
		"tenantsIgnoresCtx":     {"TenantsBounds"},
		"tenantsKeepsEmpty":     {"TenantsMembership", "StateMachine"},
	})
}

func TestSuiteCatchesBrokenRepositories(t *testing.T) {
	catches(t, "Repository", repositoryRules, func(f *fake) *repoSubject { return &repoSubject{r: repo{f}} }, map[string][]string{
		"joinedKey":        {"CrossTenant", "SharedIDs"},
		"slugOnly":         {"CrossTenant", "SharedIDs", "StateMachine"},
		"tellingNotFound":  {"CrossTenant"},
		"looseIDs":         {"BadIDs"},
		"zeroContextLists": {"NoTenant"},
		"ignoresCtx":       {"DoneContext"},
		"removeAbsentOK":   {"Delete"},
		"reversed":         {"ListOrder", "StateMachine"},
		"truncates":        {"PutGet"},
		"keepsFirst":       {"PutReplaces"},
		"getsAnyRow":       {"GetAbsent"},
	})
}

func TestSuiteCatchesBrokenEntitlements(t *testing.T) {
	catches(t, "Entitlements", entitlementsRules, func(f *fake) *entSubject { return &entSubject{e: f} }, map[string][]string{
		"slugOnly":         {"CrossTenant", "Concurrent", "StateMachine"},
		"caseFold":         {"CrossTenant", "StateMachine"},
		"defaultPlus":      {"DefaultFree", "StateMachine"},
		"ignoresFree":      {"SetPlan", "StateMachine"},
		"anyPlan":          {"InvalidPlan", "StateMachine"},
		"threePlans":       {"HostPlans", "StateMachine"},
		"foldsPlanCase":    {"HostPlans", "StateMachine"},
		"truncatesPlan":    {"HostPlans"},
		"zeroContextLists": {"NoTenant"},
		"ignoresCtx":       {"DoneContext"},
		"setPlansPartial":  {"SetPlans"},
	})
}

// Rules lists every rule the Run functions run, once each, with the text its failures cite.
func TestRulesListsEveryRuleOnce(t *testing.T) {
	var want []string
	want = appendRules(want, "Watchlist", watchlistRules)
	want = appendRules(want, "Repository", repositoryRules)
	want = appendRules(want, "Entitlements", entitlementsRules)
	got := Rules()
	if !slices.Equal(got, want) {
		t.Fatalf("Rules() = %q\nwant %q", got, want)
	}
	names := map[string]bool{}
	for _, line := range got {
		name, text, _ := strings.Cut(line, ": ")
		if names[name] || text == "" {
			t.Errorf("rule %q is listed twice or has no text", name)
		}
		names[name] = true
	}
}
