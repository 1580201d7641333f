package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
	"github.com/rotaworks/rota/tenancy/tenancytest"
)

// The Watchlist and the Entitlements keep the tenancy contracts, deny-by-default included,
// checked by the core's conformance suite against the real server. Each fresh store empties
// the one migrated schema's table.
func TestWatchlistConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	tenancytest.RunWatchlist(t, func(t *testing.T) tenancy.Watchlist {
		if _, err := pool.Exec(context.Background(), `DELETE FROM rota_watchlist`); err != nil {
			t.Fatal(err)
		}
		return postgres.NewWatchlist(pool)
	})
}

func TestEntitlementsConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	tenancytest.RunEntitlements(t, func(t *testing.T) tenancytest.SettableEntitlements {
		if _, err := pool.Exec(context.Background(), `DELETE FROM rota_plans`); err != nil {
			t.Fatal(err)
		}
		return postgres.NewEntitlements(pool)
	})
}

// Replicas on separate pools share one watch list and one set of plans: what one writes,
// the other reads.
func TestWatchlistAndEntitlementsSharedByReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	if err := postgres.Migrate(ctx, pgtest.PoolIn(t, schema, 1)); err != nil {
		t.Fatal(err)
	}
	a, b := pgtest.PoolIn(t, schema, 2), pgtest.PoolIn(t, schema, 2)
	wa, wb := postgres.NewWatchlist(a), postgres.NewWatchlist(b)
	pa, pb := postgres.NewEntitlements(a), postgres.NewEntitlements(b)
	ana := mustTC(t, "ana")
	e := tenancy.WatchlistEntry{UserID: "ana", Slug: "jobs", Tier: "hot", AddedAt: t0}
	if err := wa.Add(ctx, ana, e); err != nil {
		t.Fatal(err)
	}
	if got, err := wb.Get(ctx, ana, "jobs"); err != nil || got.Tier != "hot" || !got.AddedAt.Equal(t0) {
		t.Fatalf("replica B reads %+v, %v; want the entry replica A added", got, err)
	}
	if err := wb.Remove(ctx, ana, "jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := wa.Get(ctx, ana, "jobs"); !errors.Is(err, tenancy.ErrNotFound) {
		t.Fatalf("after replica B removed it, replica A reads %v; want ErrNotFound", err)
	}
	if err := pa.SetPlan(ctx, ana, "pro"); err != nil {
		t.Fatal(err)
	}
	if p, err := pb.Plan(ctx, ana); err != nil || p != "pro" {
		t.Fatalf("replica B reads plan %q, %v; want the pro plan replica A set", p, err)
	}
}

// queryCounter is a pgx tracer that counts the round trips a pool makes: each statement
// sent alone, and each batch.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch is one round trip, whatever it holds: it counts once.
func (c *queryCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *queryCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countedPool returns a pool on a fresh migrated schema whose statements counter counts.
func countedPool(t *testing.T) (*pgxpool.Pool, *queryCounter) {
	t.Helper()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	if err := postgres.Migrate(ctx, pgtest.PoolIn(t, schema, 1)); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, counter
}

// List reads a tenant's whole watch list — 2,316 entries here, a real tenant's — in one
// query, in slug order, without another tenant's entries.
func TestWatchlistListIsOneQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, counter := countedPool(t)

	const n = 2316
	var rows [][]any
	for i := range n {
		for _, user := range []string{"ana", "ann"} {
			rows = append(rows, []any{user, fmt.Sprintf("src-%05d", n-1-i), "warm", t0.Add(time.Duration(i) * time.Microsecond)})
		}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"rota_watchlist"}, []string{"user_id", "slug", "tier", "added_at"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	before := counter.n.Load()
	es, err := postgres.NewWatchlist(pool).List(ctx, mustTC(t, "ana"))
	if err != nil {
		t.Fatal(err)
	}
	if q := counter.n.Load() - before; q != 1 {
		t.Fatalf("List sent %d statements, want 1", q)
	}
	if len(es) != n {
		t.Fatalf("List returned %d entries, want %d", len(es), n)
	}
	for i, e := range es {
		if want := fmt.Sprintf("src-%05d", i); e.Slug != want || e.UserID != "ana" || !e.AddedAt.Equal(t0.Add(time.Duration(n-1-i)*time.Microsecond)) {
			t.Fatalf("List[%d] = %+v, want ana's %s", i, e, want)
		}
	}
}

// GetMany reads a Runner's batch — 1,000 lookups of two tenants that share slugs, some
// missing, some refused — in one query, each lookup answered with its own tenant's entry
// in the order asked; a call whose lookups are all refused sends nothing.
func TestWatchlistGetManyIsOneQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, counter := countedPool(t)
	var rows [][]any
	for i := range 600 {
		for k, user := range []string{"ana", "ann"} {
			rows = append(rows, []any{user, fmt.Sprintf("src-%04d", i), []string{"hot", "cold"}[k], t0.Add(time.Duration(i) * time.Microsecond)})
		}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"rota_watchlist"}, []string{"user_id", "slug", "tier", "added_at"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	w := postgres.NewWatchlist(pool)
	users := map[string]tenancy.Context{"ana": mustTC(t, "ana"), "ann": mustTC(t, "ann"), "": {}}
	var lookups []tenancy.Lookup
	for i := range 1000 {
		user := []string{"ann", "ana", "ana", "ann", ""}[i%5]
		slug := fmt.Sprintf("src-%04d", 999-i) // src-0600 and up are missing
		if i%97 == 0 {
			slug = "bad\x00slug"
		}
		lookups = append(lookups, tenancy.Lookup{Tenant: users[user], Slug: slug})
	}
	before := counter.n.Load()
	es, errs, err := w.GetMany(ctx, lookups)
	if err != nil {
		t.Fatal(err)
	}
	if q := counter.n.Load() - before; q != 1 {
		t.Fatalf("GetMany of %d lookups made %d round trips, want 1", len(lookups), q)
	}
	found := 0
	for i, l := range lookups {
		var want error
		var n int
		_, scanErr := fmt.Sscanf(l.Slug, "src-%04d", &n)
		switch {
		case l.Tenant.Check() != nil:
			want = tenancy.ErrNoTenant
		case scanErr != nil:
			want = tenancy.ErrInvalidID
		case n >= 600:
			want = tenancy.ErrNotFound
		}
		if want != nil {
			if !errors.Is(errs[i], want) || es[i] != (tenancy.WatchlistEntry{}) {
				t.Fatalf("lookup %d (%q, %q) = %+v, %v; want %v", i, l.Tenant.UserID(), l.Slug, es[i], errs[i], want)
			}
			continue
		}
		found++
		tier := map[string]string{"ana": "hot", "ann": "cold"}[l.Tenant.UserID()]
		if errs[i] != nil || es[i].UserID != l.Tenant.UserID() || es[i].Slug != l.Slug || es[i].Tier != tier ||
			!es[i].AddedAt.Equal(t0.Add(time.Duration(n)*time.Microsecond)) {
			t.Fatalf("lookup %d (%q, %q) = %+v, %v; want that tenant's entry", i, l.Tenant.UserID(), l.Slug, es[i], errs[i])
		}
	}
	if found < 300 {
		t.Fatalf("only %d lookups found their entry: the test reads too little", found)
	}
	before = counter.n.Load()
	_, errs, err = w.GetMany(ctx, []tenancy.Lookup{{Slug: "src-0001"}, {Tenant: users["ana"], Slug: " src-0001"}})
	if err != nil || !errors.Is(errs[0], tenancy.ErrNoTenant) || !errors.Is(errs[1], tenancy.ErrInvalidID) {
		t.Fatalf("GetMany of refused lookups = %v, %v; want each refused", errs, err)
	}
	if q := counter.n.Load() - before; q != 0 {
		t.Fatalf("GetMany of refused lookups sent %d statements, want none", q)
	}
}

// Bad input is refused before anything is sent — here to a schema without tables, where
// any statement would fail with ErrNotMigrated — and a missing table is ErrNotMigrated.
func TestWatchlistRefusesBeforeSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	w, plans := postgres.NewWatchlist(pool), postgres.NewEntitlements(pool)
	ana := mustTC(t, "ana")
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), time.Unix(1<<62, 0)} {
		err := w.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ana", Slug: "s", Tier: "hot", AddedAt: at})
		if !errors.Is(err, tenancy.ErrInvalidID) || errors.Is(err, postgres.ErrNotMigrated) {
			t.Errorf("Add with AddedAt %v = %v, want ErrInvalidID before any statement", at, err)
		}
	}
	if err := plans.SetPlan(ctx, ana, "gold "); !errors.Is(err, tenancy.ErrInvalidPlan) {
		t.Errorf("SetPlan(%q) = %v, want ErrInvalidPlan", "gold ", err)
	}
	if _, err := w.List(ctx, ana); !errors.Is(err, postgres.ErrNotMigrated) {
		t.Errorf("List on a schema without tables = %v, want ErrNotMigrated", err)
	}
	if _, _, err := w.GetMany(ctx, []tenancy.Lookup{{Tenant: ana, Slug: "s"}}); !errors.Is(err, postgres.ErrNotMigrated) {
		t.Errorf("GetMany on a schema without tables = %v, want ErrNotMigrated", err)
	}
	if _, err := plans.Plan(ctx, ana); !errors.Is(err, postgres.ErrNotMigrated) {
		t.Errorf("Plan on a schema without tables = %v, want ErrNotMigrated", err)
	}
}

// AddedAt is stored to the microsecond, truncated, the last instant of year 9999 included.
func TestWatchlistAddedAtMicroseconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := postgres.NewWatchlist(pgtest.Pool(t))
	ana := mustTC(t, "ana")
	for slug, at := range map[string]time.Time{
		"t0":   t0.Add(1999 * time.Nanosecond),
		"last": time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		if err := w.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ana", Slug: slug, Tier: "hot", AddedAt: at}); err != nil {
			t.Fatal(err)
		}
		got, err := w.Get(ctx, ana, slug)
		if want := at.Truncate(time.Microsecond); err != nil || !got.AddedAt.Equal(want) {
			t.Errorf("AddedAt %v came back as %v, %v; want %v", at, got.AddedAt, err, want)
		}
	}
}

// AddMany writes a tenant's whole batch in one statement, the last entry of a slug given
// twice winning and entries already there replaced; one bad entry refuses the call, naming
// its index, before anything is sent, and writes nothing.
func TestWatchlistAddMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, counter := countedPool(t)
	w := postgres.NewWatchlist(pool)
	ana := mustTC(t, "ana")
	if err := w.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ana", Slug: "src-0000", Tier: "cold", AddedAt: t0}); err != nil {
		t.Fatal(err)
	}
	var es []tenancy.WatchlistEntry
	for i := range 2_000 {
		es = append(es, tenancy.WatchlistEntry{UserID: "ana", Slug: fmt.Sprintf("src-%04d", i%1_500), Tier: []string{"hot", "warm"}[i/1_500], AddedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	before := counter.n.Load()
	if err := w.AddMany(ctx, ana, es); err != nil {
		t.Fatal(err)
	}
	if q := counter.n.Load() - before; q != 1 {
		t.Fatalf("AddMany of %d entries sent %d statements, want 1", len(es), q)
	}
	got, err := w.List(ctx, ana)
	if err != nil || len(got) != 1_500 {
		t.Fatalf("after AddMany List = %d entries, %v; want 1,500", len(got), err)
	}
	for i, e := range got {
		tier, at := "hot", t0.Add(time.Duration(i)*time.Second)
		if i < 500 { // given twice: the second, warm, wins
			tier, at = "warm", t0.Add(time.Duration(i+1_500)*time.Second)
		}
		if e.Slug != fmt.Sprintf("src-%04d", i) || e.Tier != tier || !e.AddedAt.Equal(at) {
			t.Fatalf("entry %d = %+v; want tier %s added at %v", i, e, tier, at)
		}
	}
	for _, bad := range []struct {
		e    tenancy.WatchlistEntry
		want error
	}{
		{tenancy.WatchlistEntry{UserID: "bo", Slug: "x", Tier: "hot", AddedAt: t0}, tenancy.ErrForbidden},
		{tenancy.WatchlistEntry{UserID: "ana", Slug: "x\x00", Tier: "hot", AddedAt: t0}, tenancy.ErrInvalidID},
		{tenancy.WatchlistEntry{UserID: "ana", Slug: "x", Tier: "hot", AddedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, tenancy.ErrInvalidID},
	} {
		batch := []tenancy.WatchlistEntry{{UserID: "ana", Slug: "new-0", Tier: "hot", AddedAt: t0}, {UserID: "ana", Slug: "new-1", Tier: "hot", AddedAt: t0}, bad.e}
		before := counter.n.Load()
		err := w.AddMany(ctx, ana, batch)
		if !errors.Is(err, bad.want) || !strings.Contains(err.Error(), "entries[2]") {
			t.Errorf("AddMany with %+v at index 2 = %v; want %v naming entries[2]", bad.e, err, bad.want)
		}
		if q := counter.n.Load() - before; q != 0 {
			t.Errorf("a refused AddMany sent %d statements, want none", q)
		}
	}
	if err := w.AddMany(ctx, tenancy.Context{}, es[:1]); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Errorf("AddMany with the zero Context = %v, want ErrNoTenant", err)
	}
	if _, err := w.Get(ctx, ana, "new-0"); !errors.Is(err, tenancy.ErrNotFound) {
		t.Errorf("after the refused calls Get(new-0) = %v; want ErrNotFound: nothing written", err)
	}
	if err := w.AddMany(ctx, ana, nil); err != nil {
		t.Errorf("AddMany of nothing = %v", err)
	}
}

// Tenants pages through the tenants with entries in byte order, one statement a page,
// whatever each tenant's list holds, and refuses a bad after or limit.
func TestWatchlistTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, counter := countedPool(t)
	var rows [][]any
	users := []string{"a", "a/b", "b", "ba", "z", "é"} // byte order: é is 0xc3 0xa9
	for i, u := range users {
		for k := range 1 + 400*(i%2) {
			rows = append(rows, []any{u, fmt.Sprintf("s%03d", k), "hot", t0})
		}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"rota_watchlist"}, []string{"user_id", "slug", "tier", "added_at"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	w := postgres.NewWatchlist(pool)
	var got []string
	pages := 0
	for after := ""; ; pages++ {
		before := counter.n.Load()
		page, err := w.Tenants(ctx, after, 4)
		if err != nil {
			t.Fatal(err)
		}
		if q := counter.n.Load() - before; q != 1 {
			t.Fatalf("Tenants sent %d statements, want 1", q)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1]
	}
	if !slices.Equal(got, users) || pages != 2 {
		t.Fatalf("Tenants, 4 a page = %q in %d pages; want %q in 2", got, pages, users)
	}
	if err := w.Remove(ctx, mustTC(t, "b"), "s000"); err != nil {
		t.Fatal(err)
	}
	if page, err := w.Tenants(ctx, "a/b", 2); err != nil || !slices.Equal(page, []string{"ba", "z"}) {
		t.Fatalf("Tenants after a/b once b has no entry = %q, %v; want ba z", page, err)
	}
	for _, bad := range []struct {
		after string
		limit int
	}{{"x\x00", 1}, {"", 0}, {"", tenancy.MaxTenantsPage + 1}} {
		if _, err := w.Tenants(ctx, bad.after, bad.limit); !errors.Is(err, tenancy.ErrInvalidID) {
			t.Errorf("Tenants(%q, %d) = %v, want ErrInvalidID", bad.after, bad.limit, err)
		}
	}
}
