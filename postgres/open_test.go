package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// ExampleOpen opens the pool a service runs on: one schema, created and migrated if need
// be, then the stores every replica shares.
//
// It has no Output comment because it needs a running server (DATABASE_URL), and an
// Example cannot skip: go test compiles it but does not run it. TestExampleOpen runs the
// same steps against the test server and checks what they print.
func ExampleOpen() {
	ctx := context.Background()
	if err := exampleOpen(ctx, os.Getenv("DATABASE_URL"), "rota", os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func exampleOpen(ctx context.Context, url, schema string, out io.Writer) error {
	pool, err := postgres.Open(ctx, url, schema) // safe on every replica at start-up
	if err != nil {
		return err
	}
	defer pool.Close()
	watch := postgres.NewWatchlist(pool)
	plans := postgres.NewEntitlements(pool)

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ana, err := tenancy.NewContext("ana")
	if err != nil {
		return err
	}
	if err := watch.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ana", Slug: "jobs", Tier: "hot", AddedAt: now}); err != nil {
		return err
	}
	if err := plans.SetPlan(ctx, ana, "pro"); err != nil {
		return err
	}

	entries, err := watch.List(ctx, ana)
	if err != nil {
		return err
	}
	plan, err := plans.Plan(ctx, ana)
	if err != nil {
		return err
	}
	for _, e := range entries {
		fmt.Fprintln(out, e.UserID, e.Slug, e.Tier, plan)
	}
	return nil
}

// TestExampleOpen runs ExampleOpen's steps on a schema of its own, which Open creates.
func TestExampleOpen(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := exampleOpen(context.Background(), pgtest.URL(), freshSchema(t, "rota_open"), &out); err != nil {
		t.Fatal(err)
	}
	if want := "ana jobs hot pro\n"; out.String() != want {
		t.Fatalf("Example printed %q, want %q", out.String(), want)
	}
}

// randomName returns prefix followed by random hex.
func randomName(t *testing.T, prefix string) string {
	t.Helper()
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(r[:])
}

// freshSchema returns a schema name that does not exist yet, prefix followed by random hex;
// the schema is dropped, if something created it, when t ends.
func freshSchema(t *testing.T, prefix string) string {
	t.Helper()
	pgtest.RequireServer(t)
	admin := pgtest.PoolIn(t, "public", 1)
	schema := randomName(t, prefix)
	t.Cleanup(func() { adminExec(t, admin, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

// adminExec runs sql as the test server's user.
func adminExec(t *testing.T, admin *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := admin.Exec(context.Background(), sql); err != nil {
		t.Errorf("%s: %v", sql, err)
	}
}

// Open creates the schema, migrates it and points every connection at it — whatever the
// name holds — and opening it again, or from several processes at once, changes nothing.
func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, prefix := range []string{"rota_open_", `Rota Open "quoted", public; DROP TABLE x; `} {
		schema := freshSchema(t, prefix)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				pool, err := postgres.Open(ctx, pgtest.URL(), schema)
				if err == nil {
					pool.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent Opens of %q: %v", schema, err)
		}
		pool, err := postgres.Open(ctx, pgtest.URL(), schema)
		if err != nil {
			t.Fatalf("Open(%q) again: %v", schema, err)
		}
		defer pool.Close()
		var current string
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil || current != schema {
			t.Fatalf("the pool works in schema %q, %v; want %q", current, err, schema)
		}
		var steps, distinct int
		if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM rota_schema_migrations`).Scan(&steps, &distinct); err != nil || steps == 0 || steps != distinct {
			t.Fatalf("%q records %d steps of %d versions, %v; want each step once", schema, steps, distinct, err)
		}
		for _, table := range []string{"rota_due", "rota_watchlist", "rota_plans"} {
			if !tableExists(t, pool, table) {
				t.Fatalf("Open did not create %s in %q", table, schema)
			}
		}
	}
}

// A schema name Open cannot use as it is is refused before anything is sent.
func TestOpenRefusesBadSchemaNames(t *testing.T) {
	t.Parallel()
	nowhere := "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1"
	for _, c := range []struct{ schema, says string }{
		{"", "empty"},
		{strings.Repeat("s", 64), "longer than PostgreSQL's 63"},
		{strings.Repeat("é", 32), "longer than PostgreSQL's 63"},
		{"ro\xffta", "UTF-8"},
		{"pg_rota", "reserves"},
		{"ro\x00ta", "control character U+0000"},
		{"rota\n", "control character U+000A"},
	} {
		pool, err := postgres.Open(context.Background(), nowhere, c.schema)
		if !errors.Is(err, postgres.ErrInvalidSchema) || !strings.Contains(err.Error(), c.says) || pool != nil {
			t.Errorf("Open(schema %q) = %v, %v; want ErrInvalidSchema saying %q", c.schema, pool, err, c.says)
		}
	}
}

// An error names the step of Open that failed.
func TestOpenNamesTheFailingStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(url, schema string) error {
		t.Helper()
		pool, err := postgres.Open(ctx, url, schema)
		if err == nil {
			pool.Close()
			return errors.New("Open succeeded")
		}
		return err
	}
	if err := open("postgres://host:notaport/db", "rota"); !strings.Contains(err.Error(), "Open: parsing the URL") {
		t.Errorf("Open of a bad URL = %v, want it to name the parsing step", err)
	}
	if err := open("postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1", "rota"); !strings.Contains(err.Error(), "Open: connecting") {
		t.Errorf("Open with no server = %v, want it to name the connecting step", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := postgres.Open(cancelled, pgtest.URL(), "rota"); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled ctx = %v, want context.Canceled", err)
	}

	// A role that may not create schemas fails at that step.
	schema := freshSchema(t, "rota_open_")
	admin := pgtest.PoolIn(t, "public", 1)
	role := randomName(t, "rota_norole_")
	adminExec(t, admin, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { adminExec(t, admin, "DROP ROLE IF EXISTS "+role) })
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	if err := open(u.String(), schema); !strings.Contains(err.Error(), "Open: creating schema") {
		t.Errorf("Open as a role without CREATE = %v, want it to name the creating step", err)
	}

	// A schema migrated by a newer release fails at the migrating step.
	adminExec(t, admin, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".rota_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()); INSERT INTO "+schema+".rota_schema_migrations (version, name) VALUES (1000000, 'future')")
	err = open(pgtest.URL(), schema)
	if !errors.Is(err, postgres.ErrSchemaTooNew) || !strings.Contains(err.Error(), "Open: migrating schema") {
		t.Errorf("Open of a schema from a newer release = %v, want ErrSchemaTooNew at the migrating step", err)
	}
}

// ExampleOpenStores opens every store a service runs on in one call: the pool, then the
// Index, the Watchlist, the Entitlements, the maintenance Lease and the StateStore over it.
//
// It has no Output comment because it needs a running server (DATABASE_URL), and an
// Example cannot skip. TestExampleOpenStores runs the same steps against the test server
// and checks what they print.
func ExampleOpenStores() {
	ctx := context.Background()
	if err := exampleOpenStores(ctx, os.Getenv("DATABASE_URL"), "rota", os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func exampleOpenStores(ctx context.Context, url, schema string, out io.Writer) error {
	st, err := postgres.OpenStores(ctx, url, schema, postgres.StoresConfig{MaxHold: time.Hour})
	if err != nil {
		return err
	}
	defer st.Close()
	// Hand them to the core: st.Index to dispatch.New and the Bridge, st.Watchlist to the
	// Bridge, st.Entitlements to the plan wiring, and to the maintenance scheduler
	// maintenance.Config{Lease: st.Lease, StateStore: st.StateStore, MaxHold: time.Hour}.

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ana, err := tenancy.NewContext("ana")
	if err != nil {
		return err
	}
	if err := st.Watchlist.AddMany(ctx, ana, []tenancy.WatchlistEntry{
		{UserID: "ana", Slug: "jobs", Tier: "hot", AddedAt: now},
		{UserID: "ana", Slug: "news", Tier: "cold", AddedAt: now},
	}); err != nil {
		return err
	}
	if err := st.Entitlements.SetPlan(ctx, ana, "enterprise"); err != nil { // a host's own plan
		return err
	}
	g, err := st.Lease.Acquire(ctx, "daemon-1", 2*time.Hour, now)
	if err != nil {
		return err
	}

	tenants, err := st.Watchlist.Tenants(ctx, "", 100)
	if err != nil {
		return err
	}
	for _, id := range tenants {
		tc, err := tenancy.NewContext(id)
		if err != nil {
			return err
		}
		entries, err := st.Watchlist.List(ctx, tc)
		if err != nil {
			return err
		}
		plan, err := st.Entitlements.Plan(ctx, tc)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, id, len(entries), "entries, plan", plan)
	}
	fmt.Fprintln(out, "lease held for", g.ExpiresAt.Sub(g.AcquiredAt)) // capped at MaxHold
	return nil
}

// TestExampleOpenStores runs ExampleOpenStores' steps on a schema of its own.
func TestExampleOpenStores(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := exampleOpenStores(context.Background(), pgtest.URL(), freshSchema(t, "rota_stores"), &out); err != nil {
		t.Fatal(err)
	}
	if want := "ana 2 entries, plan enterprise\nlease held for 1h0m0s\n"; out.String() != want {
		t.Fatalf("Example printed %q, want %q", out.String(), want)
	}
}

// OpenStores opens and migrates the schema and builds every store over one pool in it: the
// Lease with the name and MaxHold given (DefaultLeaseName and maintenance.DefaultMaxHold for
// the zero StoresConfig), fencing the StateStore of the same schema. Close closes the pool,
// twice harmlessly.
func TestOpenStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		cfg     postgres.StoresConfig
		name    string
		maxHold time.Duration
	}{
		{postgres.StoresConfig{}, postgres.DefaultLeaseName, maintenance.DefaultMaxHold},
		{postgres.StoresConfig{LeaseName: "nightly", MaxHold: time.Minute}, "nightly", time.Minute},
	} {
		schema := freshSchema(t, "rota_stores_")
		st, err := postgres.OpenStores(ctx, pgtest.URL(), schema, c.cfg)
		if err != nil {
			t.Fatalf("OpenStores(%+v): %v", c.cfg, err)
		}
		if st.Pool == nil || st.Index == nil || st.Watchlist == nil || st.Entitlements == nil || st.Lease == nil || st.StateStore == nil {
			t.Fatalf("OpenStores(%+v) = %+v, want every store", c.cfg, st)
		}
		var current string
		if err := st.Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil || current != schema {
			t.Fatalf("the pool works in schema %q, %v; want %q", current, err, schema)
		}
		if !tableExists(t, st.Pool, "rota_plans") || !slices.Contains(appliedVersions(t, st.Pool), 7) {
			t.Fatalf("OpenStores left %q unmigrated: steps %v", schema, appliedVersions(t, st.Pool))
		}

		tc := mustTC(t, "ana")
		schedule(t, st.Index, "ana", "jobs", t0)
		if _, err := st.Index.Get(ctx, tc, "jobs"); err != nil {
			t.Errorf("Index.Get of the entry it scheduled: %v", err)
		}
		if err := st.Watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: "ana", Slug: "jobs", Tier: "hot", AddedAt: t0}); err != nil {
			t.Errorf("Watchlist.Add: %v", err)
		}
		if ids, err := st.Watchlist.Tenants(ctx, "", 10); err != nil || !slices.Equal(ids, []string{"ana"}) {
			t.Errorf("Watchlist.Tenants = %q, %v; want [ana]", ids, err)
		}
		if err := st.Entitlements.SetPlan(ctx, tc, "enterprise"); err != nil {
			t.Errorf("Entitlements.SetPlan of a host plan: %v", err)
		}
		g, err := st.Lease.Acquire(ctx, "daemon-1", 100*time.Hour, t0)
		if err != nil {
			t.Fatalf("Lease.Acquire: %v", err)
		}
		if held := g.ExpiresAt.Sub(g.AcquiredAt); held != c.maxHold {
			t.Errorf("a grant asked for 100 h is held for %v, want the MaxHold %v", held, c.maxHold)
		}
		var names []string
		rows, err := st.Pool.Query(ctx, `SELECT name FROM rota_leases`)
		if err == nil {
			names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil || !slices.Equal(names, []string{c.name}) {
			t.Errorf("rota_leases holds %q, %v; want the one lease %q", names, err, c.name)
		}
		// The StateStore is fenced by that Lease: its fence is the grant's token.
		if snap, err := st.StateStore.Load(ctx); err != nil || snap.Token != g.Token {
			t.Errorf("StateStore.Load = fence %d, %v; want the grant's token %d", snap.Token, err, g.Token)
		}

		st.Close()
		st.Close()
		if _, err := st.Index.Get(ctx, tc, "jobs"); err == nil {
			t.Errorf("Index.Get after Close succeeded")
		}
		if _, err := st.Watchlist.List(ctx, tc); err == nil {
			t.Errorf("Watchlist.List after Close succeeded")
		}
	}
}

// A StoresConfig OpenStores cannot use is refused, naming the field, before anything is
// sent; any other failure is Open's, and returns no Stores.
func TestOpenStoresRefusesBadConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nowhere := "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1"
	for _, c := range []struct {
		cfg    postgres.StoresConfig
		schema string
		is     error
		says   string
	}{
		{postgres.StoresConfig{MaxHold: -time.Nanosecond}, "rota", maintenance.ErrInvalid, "MaxHold"},
		{postgres.StoresConfig{LeaseName: "heavy\x00"}, "rota", maintenance.ErrInvalid, "LeaseName"},
		{postgres.StoresConfig{LeaseName: strings.Repeat("l", vocab.MaxNameLength+1)}, "rota", maintenance.ErrInvalid, "LeaseName"},
		{postgres.StoresConfig{}, "pg_rota", postgres.ErrInvalidSchema, "reserves"},
		{postgres.StoresConfig{}, "", postgres.ErrInvalidSchema, "empty"},
	} {
		st, err := postgres.OpenStores(ctx, nowhere, c.schema, c.cfg)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) || st != nil {
			t.Errorf("OpenStores(%+v, schema %q) = %v, %v; want %v saying %q", c.cfg, c.schema, st, err, c.is, c.says)
		}
	}
	if st, err := postgres.OpenStores(ctx, nowhere, "rota", postgres.StoresConfig{}); err == nil || !strings.Contains(err.Error(), "Open: connecting") || st != nil {
		t.Errorf("OpenStores with no server = %v, %v; want Open's error at the connecting step", st, err)
	}
}
