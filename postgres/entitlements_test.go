package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// planRows returns every row of rota_plans, "user=plan", in user order.
func planRows(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT user_id || '=' || plan FROM rota_plans ORDER BY user_id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checks returns the CHECK constraints of rota_plans, "name: definition", by name.
func checks(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT conname || ': ' || pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'rota_plans'::regclass AND contype = 'c' ORDER BY conname`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Step 7 drops the CHECK that allowed only free, plus and pro on a populated rota_plans and
// loses nothing: every row survives as it was, the table keeps its other constraints, and a
// host's own plan can then be stored and read. It finds the CHECK whatever it is named.
func TestMigrateAllowsHostPlans(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, prepare string
		keep          []string // the CHECKs that must survive
	}{
		{name: "as step 4 made it"},
		{
			name: "renamed, beside a CHECK of another column",
			prepare: `ALTER TABLE rota_plans RENAME CONSTRAINT rota_plans_plan_check TO legacy_plans;
				ALTER TABLE rota_plans ADD CONSTRAINT host_user_check CHECK (user_id <> '')`,
			keep: []string{"host_user_check: CHECK ((user_id <> ''::text))"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
			if err := postgres.MigrateTo(ctx, pool, 6); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `
				INSERT INTO rota_plans (user_id, plan)
				SELECT format('u%s', lpad(i::text, 5, '0')), (ARRAY['free', 'plus', 'pro'])[1 + i % 3]
				FROM generate_series(1, 3000) AS i;
				INSERT INTO rota_plans (user_id, plan) VALUES ('Alice', 'pro'), ('alice', 'free'), ('jos`+"\u00e9"+`', 'plus'), ('a/b', 'pro')`); err != nil {
				t.Fatal(err)
			}
			if c.prepare != "" {
				if _, err := pool.Exec(ctx, c.prepare); err != nil {
					t.Fatal(err)
				}
			}
			// The premise: before step 7 the table refuses a host's plan.
			var pgErr *pgconn.PgError
			if _, err := pool.Exec(ctx, `INSERT INTO rota_plans (user_id, plan) VALUES ('probe', 'enterprise')`); !errors.As(err, &pgErr) || pgErr.Code != "23514" {
				t.Fatalf("before step 7 storing plan enterprise = %v, want a check violation (23514)", err)
			}
			before := planRows(t, pool)
			if len(before) != 3004 {
				t.Fatalf("the fixture holds %d rows, want 3004", len(before))
			}
			if err := postgres.Migrate(ctx, pool); err != nil {
				t.Fatalf("Migrate from step 6: %v", err)
			}
			if got := appliedVersions(t, pool); !slices.Contains(got, 7) {
				t.Fatalf("the schema records %v, want step 7", got)
			}
			if after := planRows(t, pool); !slices.Equal(after, before) {
				t.Fatalf("step 7 changed rota_plans: %d rows before, %d after", len(before), len(after))
			}
			if got := checks(t, pool); !slices.Equal(got, c.keep) && (len(got) != 0 || len(c.keep) != 0) {
				t.Fatalf("after step 7 rota_plans has the CHECKs %q, want %q", got, c.keep)
			}
			// The primary key still holds: one row per tenant.
			if _, err := pool.Exec(ctx, `INSERT INTO rota_plans (user_id, plan) VALUES ('u00001', 'gold')`); !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Fatalf("a second row for u00001 = %v, want a unique violation (23505)", err)
			}

			plans := postgres.NewEntitlements(pool)
			for user, want := range map[string]tenancy.PlanID{"u00001": "plus", "u00003": tenancy.PlanFree, "Alice": "pro", "nobody": tenancy.PlanFree} {
				if got, err := plans.Plan(ctx, mustTC(t, user)); err != nil || got != want {
					t.Errorf("after step 7 Plan(%s) = %q, %v; want %q", user, got, err, want)
				}
			}
			for user, p := range map[string]tenancy.PlanID{"u00002": "enterprise", "newcomer": "team plan", "Alice": "Pro"} {
				tc := mustTC(t, user)
				if err := plans.SetPlan(ctx, tc, p); err != nil {
					t.Fatalf("after step 7 SetPlan(%s, %q): %v", user, p, err)
				}
				if got, err := plans.Plan(ctx, tc); err != nil || got != p {
					t.Errorf("after step 7 Plan(%s) = %q, %v; want %q", user, got, err, p)
				}
			}
			if got := planRows(t, pool); len(got) != len(before)+1 {
				t.Errorf("after three SetPlans, one of a new tenant, rota_plans holds %d rows, want %d", len(got), len(before)+1)
			}
		})
	}
}

// SetPlan refuses a plan that is not Valid before anything is sent, with the in-memory
// Entitlements' error word for word: what is wrong with the name, not a list of plans.
func TestEntitlementsSetPlanSaysWhy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	plans, mem := postgres.NewEntitlements(pool), tenancy.NewMemoryEntitlements()
	tc := mustTC(t, "ana")
	for _, p := range []tenancy.PlanID{"", "pro ", " enterprise", "gold\x00", "te\u200bam", "a\xffb", tenancy.PlanID(strings.Repeat("p", tenancy.MaxIDLength+1))} {
		err := plans.SetPlan(ctx, tc, p)
		want := mem.SetPlan(ctx, tc, p)
		switch {
		case !errors.Is(err, tenancy.ErrInvalidPlan):
			t.Errorf("SetPlan(%q) = %v, want ErrInvalidPlan", p, err)
		case err.Error() != want.Error():
			t.Errorf("SetPlan(%q) = %q, want the in-memory error %q", p, err, want)
		case strings.Contains(err.Error(), "one of"):
			t.Errorf("SetPlan(%q) = %q lists plans; plans are the host's", p, err)
		}
	}
	if got := planRows(t, pool); len(got) != 0 {
		t.Errorf("refused SetPlans wrote %q", got)
	}
	// Nothing was sent: the same calls on a pool that reaches no server answer the same.
	if err := postgres.NewEntitlements(closedPool(t)).SetPlan(ctx, tc, "pro "); !errors.Is(err, tenancy.ErrInvalidPlan) {
		t.Errorf("SetPlan of a bad plan on a closed pool = %v, want ErrInvalidPlan", err)
	}
}

// closedPool returns a pool that was closed: any statement sent on it fails.
func closedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	return pool
}
