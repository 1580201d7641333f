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
	// Limits on the noisy user and a few quiet ones, so that the probes of claims in
	// flight and of slots have users to read.
	limits := duework.Limits{Weight: 3, MaxInFlight: 3, Every: time.Second, Burst: 2}
	if err := idx.Route(ctx, []duework.Route{{UserID: "noisy", Limits: limits}, {UserID: "quiet001", Limits: limits}, {UserID: "bulk00001", Group: "pro", Limits: limits}}); err != nil {
		tb.Fatal(err)
	}
	// A few pauses, one of them ended, so that Paused has users to read and pass over.
	for i, u := range []string{"bulk00003", "quiet002", "quiet009"} {
		if err := idx.Pause(ctx, mustTC(tb, u), t0.Add(time.Duration(i-1)*time.Hour), "upstream-429"); err != nil {
			tb.Fatal(err)
		}
	}
	// The watch list in the same shape: the noisy tenant's sources analyzed alone, then
	// every other tenant's.
	for _, sql := range []string{
		fmt.Sprintf(`INSERT INTO rota_watchlist (user_id, slug, tier, added_at) SELECT 'noisy', format('s%%s', i), 'hot', $1 FROM generate_series(1, %d) AS i`, backlog),
		`ANALYZE rota_watchlist`,
		`INSERT INTO rota_watchlist (user_id, slug, tier, added_at) SELECT user_id, 's0', 'hot', $1 FROM rota_users WHERE user_id <> 'noisy'`,
	} {
		if _, err := pool.Exec(ctx, strings.ReplaceAll(sql, "$1", "'2026-03-01 12:00:00+00'")); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE rota_watchlist SET (autovacuum_enabled = false)"); err != nil {
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
	// For the plan-order checks: a CTE scan's CTE, a CTE's own plan, a sort's keys.
	CTEName     string   `json:"CTE Name"`
	SubplanName string   `json:"Subplan Name"`
	SortKey     []string `json:"Sort Key"`
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

// planOf returns the plan the server makes for sql with args, prepared as pgx prepares it
// after settings (the Index's plan settings for it), under plan_cache_mode mode: force_custom_plan (a plan for these values) or force_generic_plan (the
// plan a prepared statement switches to after five executions, for any values).
func planOf(t *testing.T, pool *pgxpool.Pool, mode, settings, sql string, args ...any) planNode {
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
	if _, err := tx.Exec(ctx, settings); err != nil { // as the Index runs them
		t.Fatal(err)
	}
	// After the settings, which force the generic plan: the custom plan is checked too, so
	// that the shapes do not rest on that setting alone.
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
	tokens := []int64{1, 2, 3, 4}
	const (
		queue       = "Index Scan using rota_users_queue"
		queueOnly   = "Index Only Scan using rota_users_queue"
		userKey     = "Index Scan using rota_users_pkey"
		paused      = "Index Scan using rota_users_paused"
		limited     = "Index Scan using rota_users_limited"
		limitedOnly = "Index Only Scan using rota_users_limited"
		free        = "Index Scan using rota_due_free_user"
		freeOnly    = "Index Only Scan using rota_due_free_user"
		claimed     = "Index Scan using rota_due_claimed_user"
		claimedOnly = "Index Only Scan using rota_due_claimed_user"
		dueKey      = "Index Scan using rota_due_pkey"
		watchKey    = "Index Scan using rota_watchlist_pkey"
		watchOnly   = "Index Only Scan using rota_watchlist_pkey"
		tid         = "Tid Scan"
	)
	plain, counting := postgres.SQLPlanSettings, postgres.SQLCountSettings
	reads := []struct {
		name                string
		settings            string
		sql                 string
		args                []any
		users, due, watched []string // the scans allowed on rota_users, rota_due and rota_watchlist
	}{
		{"Ready", counting, postgres.SQLReady, []any{"", now, 100, 10, now.Add(time.Minute), "1772366460000000000"}, []string{queue, tid}, []string{free, claimed}, nil},
		{"Ready without a hold", counting, postgres.SQLPeek, []any{"", now, 100, 10, nil, "1772366460000000000"}, []string{queue}, []string{free, claimed}, nil},
		{"Ready of a small group", counting, postgres.SQLReady, []any{"pro", now, 100, 10, now.Add(time.Minute), "1772366460000000000"}, []string{queue, tid}, []string{free, claimed}, nil},
		{"Claim's locks", counting, postgres.SQLClaimLock, []any{users, now, true, false}, []string{userKey, limitedOnly, limited, paused}, nil, nil},
		{"Claim", counting, postgres.SQLClaim, []any{users, works, now, now.Add(time.Hour), "1772366460000000000", false, false}, []string{userKey}, []string{dueKey, claimed}, nil},
		{"Claim passing held entries over", counting, postgres.SQLClaim, []any{users, works, now, now.Add(time.Hour), "1772366460000000000", false, true}, []string{userKey}, []string{dueKey, claimed}, nil},
		{"Claim's users", counting, postgres.SQLServe, []any{now, now.Add(time.Hour), "1772366460000000000"}, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}, nil},
		{"CompleteMany", plain, postgres.SQLCompleteMany, []any{users, works, tokens, []string{"hot", "hot", "hot", "hot"},
			[]time.Time{now, now, now, now}, []*time.Time{nil, nil, nil, nil}, []int64{0, 0, 0, 0}, []int64{0, 1, 0, 0}}, []string{userKey}, []string{dueKey, tid}, nil},
		{"CompleteMany's users", plain, postgres.SQLRecomputeLocked, nil, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}, nil},
		{"Unclaim", plain, postgres.SQLUnclaim, []any{users, works, tokens, []bool{false, false, false, false}}, []string{userKey}, []string{dueKey, tid}, nil},
		{"StartClaims", plain, postgres.SQLStartClaims, []any{users, works, tokens, []time.Time{now, now, now, now}, []bool{false, false, false, false}}, nil, []string{dueKey, tid}, nil},
		{"Pause", plain, postgres.SQLPause, []any{"noisy", now, "upstream-429"}, nil, nil, nil},
		{"Resume", plain, postgres.SQLResume, []any{"noisy"}, []string{userKey, paused}, nil, nil},
		{"Paused", plain, postgres.SQLPaused, []any{"", now, 100}, []string{paused}, nil, nil},
		{"Paused after a user", plain, postgres.SQLPaused, []any{"bulk00003", now, 100}, []string{paused}, nil, nil},
		{"Groups", plain, postgres.SQLGroups, []any{now}, []string{queueOnly, queue}, nil, nil},
		{"ReadyAt recomputation", plain, postgres.SQLRecompute, []any{users}, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}, nil},
		{"ReadyAt recomputation of the noisy user", plain, postgres.SQLRecompute, []any{[]string{"noisy"}}, []string{userKey}, []string{freeOnly, free, claimedOnly, claimed}, nil},
		{"Route's locks", plain, postgres.SQLLockUsers, []any{users}, []string{userKey}, nil, nil},
		{"Route", plain, postgres.SQLRoute, []any{users, []string{"a", "b", "c", "d"}, []int32{0, 2, 3, 0}, []int32{0, 1, 2, 3},
			[]int64{0, 1e9, 0, 5}, []int32{0, 0, 4, 1}}, []string{userKey}, []string{claimedOnly, claimed}, nil},
		{"User", counting, postgres.SQLUser, []any{"noisy", now}, []string{userKey}, []string{claimed}, nil},
		{"User of a quiet user", counting, postgres.SQLUser, []any{"quiet001", now}, []string{userKey}, []string{claimed}, nil},
		{"Entries", plain, postgres.SQLEntries, []any{"noisy", "w0000100", 50}, nil, []string{dueKey}, nil},
		{"Entries of a quiet user", plain, postgres.SQLEntries, []any{"quiet001", "", 50}, nil, []string{dueKey}, nil},
		{"Watchlist.Tenants", plain, postgres.SQLTenants, []any{"", 100}, nil, nil, []string{watchOnly, watchKey}},
		{"Watchlist.Tenants after the noisy one", plain, postgres.SQLTenants, []any{"noisy", 100}, nil, nil, []string{watchOnly, watchKey}},
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			for _, r := range reads {
				plan := planOf(t, pool, mode, r.settings, r.sql, r.args...)
				for _, rel := range []struct {
					name    string
					allowed []string
				}{{"rota_users", r.users}, {"rota_due", r.due}, {"rota_watchlist", r.watched}} {
					scans, conds := plan.scans(rel.name)
					if !allowedScans(scans, rel.allowed) {
						t.Errorf("%s reads %s with %q; want only %q", r.name, rel.name, scans, rel.allowed)
					}
					for i, s := range scans {
						if s == dueKey && !strings.Contains(conds[i], "work_key") {
							t.Errorf("%s reads a range of rota_due's primary key (%s), which walks a user's backlog", r.name, conds[i])
						}
						if (s == watchKey || s == watchOnly) && !strings.Contains(conds[i], "user_id >") {
							t.Errorf("%s reads rota_watchlist's primary key without a bound (%s), which walks every entry", r.name, conds[i])
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

// CompleteMany and StartClaims lock no row before they write it: each UPDATE takes the
// rows' locks as it writes them, so it keeps the one global lock order (UserID, WorkKey)
// only when its plan writes them in that order — a nested loop with the items, sorted,
// outside and the primary key inside. Checked in the plan for these values and in the
// generic plan, under stale and fresh statistics.
func TestWritesInKeyOrder(t *testing.T) {
	t.Parallel()
	pool := staleFixture(t, 20_000, 2_000, 5_000)
	now := t0.Add(time.Minute)
	users, works, tokens := []string{"quiet007", "bulk00001", "noisy", "bulk00002"}, []string{"w0", "w0", "w0000001", "w0"}, []int64{1, 2, 3, 4}
	writes := []struct {
		name string
		sql  string
		args []any
	}{
		{"CompleteMany", postgres.SQLCompleteMany, []any{users, works, tokens, []string{"hot", "hot", "hot", "hot"},
			[]time.Time{now, now, now, now}, []*time.Time{nil, nil, nil, nil}, []int64{0, 0, 0, 0}, []int64{0, 1, 0, 0}}},
		{"StartClaims", postgres.SQLStartClaims, []any{users, works, tokens, []time.Time{now, now, now, now}, []bool{false, false, false, false}}},
	}
	for _, stats := range []string{"stale", "analyzed"} {
		if stats == "analyzed" {
			if _, err := pool.Exec(context.Background(), "ANALYZE rota_due; ANALYZE rota_users"); err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range writes {
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				plan := planOf(t, pool, mode, postgres.SQLPlanSettings, w.sql, w.args...)
				write := plan.find(func(n planNode) bool { return n.NodeType == "ModifyTable" && n.Relation == "rota_due" })
				switch {
				case write == nil || len(write.Plans) != 1 || write.Plans[0].NodeType != "Nested Loop":
					t.Errorf("%s, %s, %s: the write of rota_due is not driven by a nested loop: %+v", w.name, stats, mode, write)
				case len(write.Plans[0].Plans) != 2 || write.Plans[0].Plans[0].NodeType != "CTE Scan" || write.Plans[0].Plans[0].CTEName != "k" ||
					write.Plans[0].Plans[1].NodeType+" using "+write.Plans[0].Plans[1].IndexName != "Index Scan using rota_due_pkey":
					t.Errorf("%s, %s, %s: the nested loop is not the sorted items outside and rota_due's primary key inside: %+v", w.name, stats, mode, write.Plans[0])
				}
				k := plan.find(func(n planNode) bool { return n.SubplanName == "CTE k" })
				// The planner names the items k, or k_1 where the statement reads k twice.
				if k == nil || k.NodeType != "Sort" || !slices.Equal(k.SortKey, []string{`k.user_id COLLATE "C"`, `k.work_key COLLATE "C"`}) &&
					!slices.Equal(k.SortKey, []string{`k_1.user_id COLLATE "C"`, `k_1.work_key COLLATE "C"`}) {
					t.Errorf("%s, %s, %s: the items are not sorted by (user_id, work_key) byte by byte: %+v", w.name, stats, mode, k)
				}
			}
		}
	}
}

// find returns the first node of the plan, depth first, that is, or nil.
func (n *planNode) find(is func(planNode) bool) *planNode {
	if is(*n) {
		return n
	}
	for i := range n.Plans {
		if f := n.Plans[i].find(is); f != nil {
			return f
		}
	}
	return nil
}

// TestGetManyProbesEachLookup: Watchlist.GetMany reads one probe of rota_watchlist's
// primary key per lookup, in a nested loop, whatever the statistics and however many
// lookups a cycle sends — never a scan of the whole watchlist for a hash join, which the
// planner picks without the plan settings once a batch holds a thousand lookups.
func TestGetManyProbesEachLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO rota_watchlist (user_id, slug, tier, added_at)
		SELECT format('u%s', i / 100), format('s%s', i % 100), 'hot', $1::timestamptz FROM generate_series(1, 50000) AS i`, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE rota_watchlist"); err != nil {
		t.Fatal(err)
	}
	users, slugs := make([]string, 1000), make([]string, 1000)
	for i := range users {
		users[i], slugs[i] = fmt.Sprintf("u%d", i*7%500), fmt.Sprintf("s%d", i%100)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := planOf(t, pool, mode, postgres.SQLPlanSettings, postgres.SQLGetMany, users, slugs)
		scans, _ := plan.scans("rota_watchlist")
		join := plan.find(func(n planNode) bool { return strings.HasSuffix(n.NodeType, "Join") || n.NodeType == "Nested Loop" })
		if !slices.Equal(scans, []string{"Index Scan using rota_watchlist_pkey"}) || join == nil || join.NodeType != "Nested Loop" {
			t.Errorf("%s: GetMany reads rota_watchlist by %v, joined by %+v; want one primary-key probe per lookup in a nested loop", mode, scans, join)
		}
	}
	// The hazard is real: without the settings the planner reads the whole watchlist here.
	plan := planOf(t, pool, "force_custom_plan", "SELECT 1", postgres.SQLGetMany, users, slugs)
	if scans, _ := plan.scans("rota_watchlist"); slices.Equal(scans, []string{"Index Scan using rota_watchlist_pkey"}) {
		t.Errorf("without the plan settings the planner probes by primary key too (%v): the fixture no longer shows the hazard", scans)
	} else {
		t.Logf("without the plan settings: %v", scans)
	}
}
