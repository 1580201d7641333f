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
// analyzed while it is the whole table, then many users added — in bulk, and a few through
// the Index — and part of the backlog claimed, which changes far too few rows for autovacuum
// to analyze again (and autovacuum is off for these tables, so that it cannot rescue the
// test either). The statistics now say that every row of rota_due belongs to "noisy" and is
// unclaimed, and that rota_users holds one user.
func staleFixture(tb testing.TB, backlog, claimed, quiet int) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(tb)
	for _, table := range []string{"rota_due", "rota_users"} {
		if _, err := pool.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
			tb.Fatal(err)
		}
	}
	pgtest.LoadDue(tb, pool, []string{"noisy"}, []int{backlog}, func(int) time.Time { return t0 })
	for _, sql := range []string{
		fmt.Sprintf(`INSERT INTO rota_due (user_id, work_key, tier, due_at, miss_streak)
			SELECT format('bulk%%s', lpad(i::text, 5, '0')), 'w0', 'hot', $1::timestamptz + i * interval '1 ms', 0
			FROM generate_series(1, %d) AS i`, quiet),
		`INSERT INTO rota_users (user_id, free_at, turn, group_name)
			SELECT user_id, due_at, due_at, CASE WHEN user_id < 'bulk005' THEN 'pro' ELSE '' END FROM rota_due
			WHERE user_id LIKE 'bulk%' AND $1::timestamptz IS NOT NULL`,
		fmt.Sprintf(`UPDATE rota_due SET claim_token = nextval('rota_claim_token'), claim_until = $1::timestamptz + interval '1 hour'
			WHERE user_id = 'noisy' AND work_key < 'w%07d'`, claimed),
	} {
		if _, err := pool.Exec(ctx, sql, t0.Add(time.Second)); err != nil {
			tb.Fatal(err)
		}
	}
	idx := postgres.NewIndex(pool)
	for i := range 20 {
		u := fmt.Sprintf("quiet%03d", i)
		if err := idx.Schedule(ctx, mustTC(tb, u), duework.Entry{UserID: u, WorkKey: "w0", Tier: "hot", DueAt: t0.Add(time.Second)}); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE rota_users u SET free_at = f, claim_end_at = c, turn = greatest(least(f, c), last_served)
		FROM (SELECT min(d.due_at) FILTER (WHERE d.claim_until IS NULL) AS f, min(greatest(d.due_at, d.claim_until)) FILTER (WHERE d.claim_until IS NOT NULL) AS c
			FROM rota_due d WHERE d.user_id = 'noisy') x WHERE user_id = 'noisy'`); err != nil {
		tb.Fatal(err)
	}
	checkReadyAt(tb, pool)
	return pool
}

// planNode is the part of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

// scans lists every scan of relation in the plan, as "Node Type[ using Index Name]" (a
// bitmap heap scan names the indexes of its bitmaps), and each one's index condition.
func (n planNode) scans(relation string) (scans, conds []string) {
	if n.Relation == relation && n.NodeType != "ModifyTable" {
		s := n.NodeType
		if n.IndexName != "" {
			s += " using " + n.IndexName
		}
		if n.NodeType == "Bitmap Heap Scan" {
			s += " using " + strings.Join(n.bitmapIndexes(), "+")
		}
		scans, conds = append(scans, s), append(conds, n.IndexCond)
	}
	for _, c := range n.Plans {
		s, ic := c.scans(relation)
		scans, conds = append(scans, s...), append(conds, ic...)
	}
	return scans, conds
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
	if _, err := tx.Exec(ctx, postgres.SQLPlanSettings); err != nil { // as the Index runs them
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
		if err := tx.QueryRow(ctx, "SELECT quote_nullable($1::"+name+")", args[i]).Scan(&params[i]); err != nil {
			t.Fatal(err)
		}
		types[i] = name
	}
	typeList, paramList := "", ""
	if len(types) > 0 {
		typeList, paramList = " ("+strings.Join(types, ", ")+")", " ("+strings.Join(params, ", ")+")"
	}
	if _, err := tx.Exec(ctx, "PREPARE planned"+typeList+" AS "+sql); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE planned")
	var out []struct{ Plan planNode }
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE planned"+paramList).Scan(&out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("EXPLAIN returned %d plans", len(out))
	}
	return out[0].Plan
}

// Every read of the dispatch path is a bounded index scan whatever the statistics say: a
// bulk load leaves statistics that describe one tenant's backlog as the whole of rota_due
// and one user as the whole of rota_users. In the plan for these values and in the generic
// plan alike, users are read only from the front of a group's range of rota_users_queue or
// by primary key, and entries only from a user's keyset range of rota_due_free_user or
// rota_due_claimed_user or by the whole primary key (user and work key) — never a sequential
// scan, a bitmap, rota_due_free (every due row, in due order), or a range of the primary
// key over one user's backlog. Checked on the plans' shapes, not their times.
//
// It checks two sets of statistics over the same rows: the stale ones of the bulk load,
// and fresh ones from ANALYZE, which say a user holds a few entries on average — and so
// would have the planner read the noisy user's first entries by walking its whole range of
// the primary key and sorting it, were incremental sorts allowed.
func TestPlansSurviveStaleStatistics(t *testing.T) {
	t.Parallel()
	for _, stats := range []string{"stale", "analyzed"} {
		t.Run(stats, func(t *testing.T) {
			t.Parallel()
			pool := staleFixture(t, 20_000, 2_000, 5_000)
			if stats == "analyzed" {
				if _, err := pool.Exec(context.Background(), "ANALYZE rota_due; ANALYZE rota_users"); err != nil {
					t.Fatal(err)
				}
			}
			checkPlans(t, pool)
		})
	}
}

func checkPlans(t *testing.T, pool *pgxpool.Pool) {
	now := t0.Add(time.Minute)
	users := []string{"bulk00001", "bulk00002", "noisy", "quiet007"}
	works := []string{"w0", "w0", "w0000001", "w0"}
	const (
		queue       = "Index Scan using rota_users_queue"
		queueOnly   = "Index Only Scan using rota_users_queue"
		userKey     = "Index Scan using rota_users_pkey"
		free        = "Index Scan using rota_due_free_user"
		freeOnly    = "Index Only Scan using rota_due_free_user"
		claimed     = "Index Scan using rota_due_claimed_user"
		claimedOnly = "Index Only Scan using rota_due_claimed_user"
		dueKey      = "Index Scan using rota_due_pkey"
		tid         = "Tid Scan"
	)
	reads := []struct {
		name       string
		sql        string
		args       []any
		users, due []string // the scans allowed on rota_users and rota_due
	}{
		{"Ready", postgres.SQLReady, []any{"", now, 100, 11, now.Add(time.Minute)}, []string{queue, tid}, []string{free, claimed}},
		{"Ready without a hold", postgres.SQLPeek, []any{"", now, 100, 11, nil}, []string{queue}, []string{free, claimed}},
		{"Ready of a small group", postgres.SQLReady, []any{"pro", now, 100, 11, now.Add(time.Minute)}, []string{queue, tid}, []string{free, claimed}},
		{"Claim", postgres.SQLClaim, []any{users, works, now, now.Add(time.Hour)}, []string{userKey}, []string{dueKey, tid}},
		{"Claim's users", postgres.SQLServe, []any{now, now.Add(time.Hour)}, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}},
		{"CompleteMany's users", postgres.SQLRecomputeLocked, nil, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}},
		{"CompleteMany", postgres.SQLCompleteMany, []any{users, works, []int64{1, 2, 3, 4}, []string{"hot", "hot", "hot", "hot"},
			[]time.Time{now, now, now, now}, []*time.Time{nil, nil, nil, nil}, []int64{0, 0, 0, 0}}, []string{userKey}, []string{dueKey, tid}},
		{"Groups", postgres.SQLGroups, []any{now}, []string{queueOnly, queue}, nil},
		{"ReadyAt recomputation", postgres.SQLRecompute, []any{users}, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}},
		{"ReadyAt recomputation of the noisy user", postgres.SQLRecompute, []any{[]string{"noisy"}}, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}},
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			for _, r := range reads {
				plan := planOf(t, pool, mode, r.sql, r.args...)
				for _, rel := range []struct {
					name    string
					allowed []string
				}{{"rota_users", r.users}, {"rota_due", r.due}} {
					scans, conds := plan.scans(rel.name)
					if !allowedScans(scans, rel.allowed) {
						t.Errorf("%s reads %s with %q; want only %q", r.name, rel.name, scans, rel.allowed)
					}
					for i, s := range scans {
						if s == dueKey && !strings.Contains(conds[i], "work_key") {
							t.Errorf("%s reads a range of rota_due's primary key (%s), which walks a user's backlog", r.name, conds[i])
						}
					}
				}
			}
		})
	}
}

// allowedScans reports whether scans holds only scans of allowed, and some scan when
// allowed is not empty.
func allowedScans(scans, allowed []string) bool {
	for _, s := range scans {
		if !slices.Contains(allowed, s) {
			return false
		}
	}
	return len(scans) > 0 || len(allowed) == 0
}
