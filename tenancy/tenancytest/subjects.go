package tenancytest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// subject is an implementation under test as the shared rules see it.
type subject interface {
	// calls returns every method of the implementation.
	calls() []call
	// seed writes something for tc, so that a rule can check it stays as it was.
	seed(ctx context.Context, tc tenancy.Context) error
	// state returns what the tenants hold, one line per row, read through their Contexts.
	state(ctx context.Context, tcs ...tenancy.Context) ([]string, error)
}

// call is one method, made on behalf of tc with id when it takes one.
type call struct {
	name  string
	field string // the ID the method takes, named as its errors must name it; "" for none
	do    func(ctx context.Context, tc tenancy.Context, id string) error
}

// keyed is a subject that stores rows by ID within a tenant: a Watchlist (entries by slug,
// the row's value in Tier) or a Repository (values by id).
type keyed interface {
	subject
	field() string
	put(ctx context.Context, tc tenancy.Context, id, v string) error
	get(ctx context.Context, tc tenancy.Context, id string) (string, error)
	del(ctx context.Context, tc tenancy.Context, id string) error
	// list returns the tenant's rows in the order List returned them.
	list(ctx context.Context, tc tenancy.Context) ([]kv, error)
	// scribble calls List and overwrites every element of the slice it returned.
	scribble(ctx context.Context, tc tenancy.Context) error
}

type kv struct{ id, v string }

// watchKeyed is what a keyed subject has beyond a Repository when it is a Watchlist: reads
// of many tenants' rows in one call, writes of many rows in one call, and the listing of the
// tenants that hold rows. The shared state machine drives these too when its subject has
// them.
type watchKeyed interface {
	// getMany reads the lookups' rows in one call and returns their values.
	getMany(ctx context.Context, lookups []tenancy.Lookup) ([]string, []error, error)
	// putMany stores the rows for tc in one call, in the order given.
	putMany(ctx context.Context, tc tenancy.Context, rows []kv) error
	// tenants returns one page of the users that hold rows.
	tenants(ctx context.Context, after string, limit int) ([]string, error)
}

// watchSubject is a Watchlist under test.
type watchSubject struct{ w tenancy.Watchlist }

func (x *watchSubject) field() string { return "slug" }

func (x *watchSubject) put(ctx context.Context, tc tenancy.Context, id, v string) error {
	return x.w.Add(ctx, tc, tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: id, Tier: v, AddedAt: t0})
}

func (x *watchSubject) get(ctx context.Context, tc tenancy.Context, id string) (string, error) {
	e, err := x.w.Get(ctx, tc, id)
	if err != nil {
		return "", err
	}
	if e.UserID != tc.UserID() || e.Slug != id {
		return "", fmt.Errorf("Get(%s, %q) returned %s", tc.UserID(), id, showEntry(e))
	}
	return e.Tier, nil
}

func (x *watchSubject) del(ctx context.Context, tc tenancy.Context, id string) error {
	return x.w.Remove(ctx, tc, id)
}

func (x *watchSubject) list(ctx context.Context, tc tenancy.Context) ([]kv, error) {
	es, err := x.w.List(ctx, tc)
	if err != nil {
		return nil, err
	}
	out := make([]kv, len(es))
	for i, e := range es {
		if e.UserID != tc.UserID() {
			return nil, fmt.Errorf("List(%s) returned %s", tc.UserID(), showEntry(e))
		}
		out[i] = kv{e.Slug, e.Tier}
	}
	return out, nil
}

func (x *watchSubject) scribble(ctx context.Context, tc tenancy.Context) error {
	es, err := x.w.List(ctx, tc)
	for i := range es {
		es[i] = tenancy.WatchlistEntry{UserID: "scribbled", Slug: "scribbled"}
	}
	return err
}

func (x *watchSubject) getMany(ctx context.Context, lookups []tenancy.Lookup) ([]string, []error, error) {
	es, errs, err := x.w.GetMany(ctx, lookups)
	if err != nil {
		return nil, nil, err
	}
	if len(es) != len(lookups) || len(errs) != len(lookups) {
		return nil, nil, fmt.Errorf("GetMany of %d lookups returned %d entries and %d errors", len(lookups), len(es), len(errs))
	}
	vs := make([]string, len(es))
	for i, e := range es {
		l := lookups[i]
		if errs[i] != nil {
			continue
		}
		if e.UserID != l.Tenant.UserID() || e.Slug != l.Slug {
			return nil, nil, fmt.Errorf("GetMany's lookup %d (%s, %q) returned %s", i, l.Tenant.UserID(), l.Slug, showEntry(e))
		}
		vs[i] = e.Tier
	}
	return vs, errs, nil
}

func (x *watchSubject) putMany(ctx context.Context, tc tenancy.Context, rows []kv) error {
	es := make([]tenancy.WatchlistEntry, len(rows))
	for i, r := range rows {
		es[i] = tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: r.id, Tier: r.v, AddedAt: t0.Add(time.Duration(i) * time.Microsecond)}
	}
	return x.w.AddMany(ctx, tc, es)
}

func (x *watchSubject) tenants(ctx context.Context, after string, limit int) ([]string, error) {
	return x.w.Tenants(ctx, after, limit)
}

func (x *watchSubject) addAs(ctx context.Context, tc tenancy.Context, user, id string) error {
	return x.w.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: id, Tier: "hot", AddedAt: t0})
}

func (x *watchSubject) calls() []call {
	return []call{
		{"Watchlist.Add", "slug", func(ctx context.Context, tc tenancy.Context, id string) error {
			return x.w.Add(ctx, tc, tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: id, Tier: "hot", AddedAt: t0})
		}},
		{"Watchlist.AddMany", "slug", func(ctx context.Context, tc tenancy.Context, id string) error {
			return x.w.AddMany(ctx, tc, []tenancy.WatchlistEntry{
				{UserID: tc.UserID(), Slug: "ok", Tier: "hot", AddedAt: t0},
				{UserID: tc.UserID(), Slug: id, Tier: "hot", AddedAt: t0},
			})
		}},
		{"Watchlist.Remove", "slug", x.w.Remove},
		{"Watchlist.Get", "slug", func(ctx context.Context, tc tenancy.Context, id string) error {
			_, err := x.w.Get(ctx, tc, id)
			return err
		}},
		{"Watchlist.List", "", func(ctx context.Context, tc tenancy.Context, _ string) error {
			_, err := x.w.List(ctx, tc)
			return err
		}},
	}
}

func (x *watchSubject) seed(ctx context.Context, tc tenancy.Context) error {
	for i, slug := range aIDs {
		e := tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: slug, Tier: "warm", AddedAt: t0.Add(time.Duration(i) * time.Second)}
		if err := x.w.Add(ctx, tc, e); err != nil {
			return err
		}
	}
	return nil
}

func (x *watchSubject) state(ctx context.Context, tcs ...tenancy.Context) ([]string, error) {
	var out []string
	for _, tc := range tcs {
		es, err := x.w.List(ctx, tc)
		if err != nil {
			return nil, fmt.Errorf("List(%s): %w", tc.UserID(), err)
		}
		for _, e := range es {
			out = append(out, tc.UserID()+": "+showEntry(e))
		}
	}
	return out, nil
}

// showEntry formats an entry with its AddedAt in UTC, so that equal instants read alike.
func showEntry(e tenancy.WatchlistEntry) string {
	return fmt.Sprintf("{UserID %q Slug %q Tier %q AddedAt %s}", e.UserID, e.Slug, e.Tier, e.AddedAt.UTC().Format(time.RFC3339Nano))
}

// repoSubject is a Repository under test. It stores each row's id with its value, as
// "id\nvalue", so that a read can tell which row it got: an ID never holds a newline.
type repoSubject struct{ r tenancy.Repository[string] }

func (x *repoSubject) field() string { return "id" }

func (x *repoSubject) put(ctx context.Context, tc tenancy.Context, id, v string) error {
	return x.r.Put(ctx, tc, id, id+"\n"+v)
}

func (x *repoSubject) get(ctx context.Context, tc tenancy.Context, id string) (string, error) {
	s, err := x.r.Get(ctx, tc, id)
	if err != nil {
		return "", err
	}
	got, v, ok := strings.Cut(s, "\n")
	if !ok || got != id {
		return "", fmt.Errorf("Get(%s, %q) returned %q, a value stored under another id", tc.UserID(), id, s)
	}
	return v, nil
}

func (x *repoSubject) del(ctx context.Context, tc tenancy.Context, id string) error {
	return x.r.Delete(ctx, tc, id)
}

func (x *repoSubject) list(ctx context.Context, tc tenancy.Context) ([]kv, error) {
	vs, err := x.r.List(ctx, tc)
	if err != nil {
		return nil, err
	}
	out := make([]kv, len(vs))
	for i, s := range vs {
		id, v, ok := strings.Cut(s, "\n")
		if !ok {
			return nil, fmt.Errorf("List(%s) returned %q, a value the suite never stored", tc.UserID(), s)
		}
		out[i] = kv{id, v}
	}
	return out, nil
}

func (x *repoSubject) scribble(ctx context.Context, tc tenancy.Context) error {
	vs, err := x.r.List(ctx, tc)
	for i := range vs {
		vs[i] = "scribbled"
	}
	return err
}

func (x *repoSubject) calls() []call {
	return []call{
		{"Repository.Put", "id", func(ctx context.Context, tc tenancy.Context, id string) error {
			return x.r.Put(ctx, tc, id, id+"\nput")
		}},
		{"Repository.Get", "id", func(ctx context.Context, tc tenancy.Context, id string) error {
			_, err := x.r.Get(ctx, tc, id)
			return err
		}},
		{"Repository.Delete", "id", x.r.Delete},
		{"Repository.List", "", func(ctx context.Context, tc tenancy.Context, _ string) error {
			_, err := x.r.List(ctx, tc)
			return err
		}},
	}
}

func (x *repoSubject) seed(ctx context.Context, tc tenancy.Context) error {
	for _, id := range aIDs {
		if err := x.put(ctx, tc, id, "seed"); err != nil {
			return err
		}
	}
	return nil
}

func (x *repoSubject) state(ctx context.Context, tcs ...tenancy.Context) ([]string, error) {
	var out []string
	for _, tc := range tcs {
		vs, err := x.r.List(ctx, tc)
		if err != nil {
			return nil, fmt.Errorf("List(%s): %w", tc.UserID(), err)
		}
		for _, v := range vs {
			out = append(out, fmt.Sprintf("%s: %q", tc.UserID(), v))
		}
	}
	return out, nil
}

// entSubject is an Entitlements under test.
type entSubject struct{ e SettableEntitlements }

func (x *entSubject) calls() []call {
	return []call{
		{"Entitlements.Plan", "", func(ctx context.Context, tc tenancy.Context, _ string) error {
			_, err := x.e.Plan(ctx, tc)
			return err
		}},
		{"Entitlements.SetPlan", "", func(ctx context.Context, tc tenancy.Context, _ string) error {
			return x.e.SetPlan(ctx, tc, "pro")
		}},
	}
}

func (x *entSubject) seed(ctx context.Context, tc tenancy.Context) error {
	return x.e.SetPlan(ctx, tc, "plus")
}

func (x *entSubject) state(ctx context.Context, tcs ...tenancy.Context) ([]string, error) {
	var out []string
	for _, tc := range tcs {
		p, err := x.e.Plan(ctx, tc)
		if err != nil {
			return nil, fmt.Errorf("Plan(%s): %w", tc.UserID(), err)
		}
		out = append(out, fmt.Sprintf("%s: %s", tc.UserID(), p))
	}
	return out, nil
}
