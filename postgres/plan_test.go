package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// staleFixture is the production hazard of a bulk load: one tenant's backlog COPY-loaded and
// analyzed while it is the whole table, then quiet users scheduled through the Index, which
// changes far too few rows for autovacuum to analyze again (and autovacuum is off for these
// tables, so that it cannot rescue the test either). The statistics now say that every row
// of rota_due belongs to "noisy".
func staleFixture(tb testing.TB, backlog, quiet int) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(tb)
	for _, table := range []string{"rota_due", "rota_users"} {
		if _, err := pool.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
			tb.Fatal(err)
		}
	}
	pgtest.LoadDue(tb, pool, []string{"noisy"}, []int{backlog}, func(int) time.Time { return t0 })
	idx := postgres.NewIndex(pool)
	for i := range quiet {
		u := fmt.Sprintf("quiet%03d", i)
		if err := idx.Schedule(ctx, mustTC(tb, u), duework.Entry{UserID: u, WorkKey: "w0", Tier: "hot", DueAt: t0.Add(time.Second)}); err != nil {
			tb.Fatal(err)
		}
	}
	return pool
}

// planNode is the part of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

// rotaDueScans lists every scan of rota_due in the plan, as "Node Type[ using Index Name]"
// (a bitmap heap scan names the indexes of its bitmaps).
func (n planNode) rotaDueScans() []string {
	var out []string
	if n.Relation == "rota_due" {
		s := n.NodeType
		if n.IndexName != "" {
			s += " using " + n.IndexName
		}
		if n.NodeType == "Bitmap Heap Scan" {
			s += " using " + strings.Join(n.bitmapIndexes(), "+")
		}
		out = append(out, s)
	}
	for _, c := range n.Plans {
		out = append(out, c.rotaDueScans()...)
	}
	return out
}

// bitmapIndexes lists the indexes of the Bitmap Index Scans below n.
func (n planNode) bitmapIndexes() []string {
	var out []string
	for _, c := range n.Plans {
		if c.NodeType == "Bitmap Index Scan" {
			out = append(out, c.IndexName)
		}
		out = append(out, c.bitmapIndexes()...)
	}
	return out
}

// planOf returns the plan the server makes for sql with args, prepared as pgx prepares it, under
// plan_cache_mode mode: force_custom_plan (a plan for these values) or force_generic_plan (the
// plan a prepared statement switches to after five executions, for any values).
func planOf(t *testing.T, pool *pgxpool.Pool, mode, sql string, args ...any) planNode {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	sd, err := tx.Prepare(ctx, "", sql)
	if err != nil {
		t.Fatal(err)
	}
	types := make([]string, len(sd.ParamOIDs))
	params := make([]string, len(sd.ParamOIDs))
	for i, oid := range sd.ParamOIDs {
		var name string
		if err := tx.QueryRow(ctx, "SELECT format_type($1, NULL)", oid).Scan(&name); err != nil {
			t.Fatal(err)
		}
		// EXECUTE takes its arguments as literals: the server quotes each value.
		if err := tx.QueryRow(ctx, "SELECT quote_literal($1::"+name+")", args[i]).Scan(&params[i]); err != nil {
			t.Fatal(err)
		}
		types[i] = name
	}
	if _, err := tx.Exec(ctx, "PREPARE planned ("+strings.Join(types, ", ")+") AS "+sql); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE planned")
	var out []struct{ Plan planNode }
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE planned ("+strings.Join(params, ", ")+")").Scan(&out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("EXPLAIN returned %d plans", len(out))
	}
	return out[0].Plan
}

// A bulk load leaves statistics that describe one tenant's backlog as the whole table. The
// per-user reads must still be ranges of rota_due_free_user — never a walk of
// rota_due_free (every due row, in due order), a sequential scan or a bitmap of the backlog
// — in the plan for these values and in the generic plan alike. Checked on the plans'
// shapes, not their times.
func TestPlansSurviveStaleStatistics(t *testing.T) {
	t.Parallel()
	pool := staleFixture(t, 20_000, 20)
	now := t0.Add(time.Minute)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			heads := planOf(t, pool, mode, postgres.SQLDueHeads, now, 11).rotaDueScans()
			if want := []string{"Index Scan using rota_due_free_user"}; !hasOnly(heads, want, "using rota_due_claimed") {
				t.Errorf("DueHeads reads rota_due with %q; want the per-user probe %q and the range of rota_due_claimed", heads, want)
			}
			recompute := planOf(t, pool, mode, postgres.SQLRecompute, "quiet007").rotaDueScans()
			if !hasOnly(recompute, []string{"Index Only Scan using rota_due_free_user", "Index Scan using rota_due_free_user"}, "") || len(recompute) != 1 {
				t.Errorf("the free_at recomputation reads rota_due with %q; want one range of rota_due_free_user", recompute)
			}
		})
	}
}

// hasOnly reports whether scans holds at least one of want and nothing else but scans ending
// in also (when also is not empty).
func hasOnly(scans, want []string, also string) bool {
	found := false
	for _, s := range scans {
		switch {
		case slices.Contains(want, s):
			found = true
		case also != "" && strings.HasSuffix(s, also):
		default:
			return false
		}
	}
	return found
}
