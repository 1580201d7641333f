package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// appliedVersions returns the steps the pool's schema records.
func appliedVersions(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT version FROM rota_schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// tableExists reports whether the pool's current schema holds the table.
func tableExists(t *testing.T, pool *pgxpool.Pool, table string) bool {
	t.Helper()
	var ok bool
	err := pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1)`, table).Scan(&ok)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// Steps are numbered with gaps (a number may be kept for a step another release adds), and
// a step numbered below the ones a schema already holds is still applied when it arrives:
// Migrate applies every step the schema has not recorded, not only those above its highest.
func TestMigrateAppliesEveryMissingStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.MigrateProbes(ctx, pool, 10, 20, 40); err != nil {
		t.Fatalf("steps 10, 20, 40: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Equal(got, []int{10, 20, 40}) {
		t.Fatalf("after steps 10, 20, 40 the schema records %v", got)
	}
	if err := postgres.MigrateProbes(ctx, pool, 10, 20, 30, 40); err != nil {
		t.Fatalf("step 30 added below 40: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Equal(got, []int{10, 20, 30, 40}) || !tableExists(t, pool, "rota_probe_30") {
		t.Fatalf("after step 30 arrived the schema records %v (probe table: %v); want 30 applied", got, tableExists(t, pool, "rota_probe_30"))
	}
	// A release that lacks a step the schema holds refuses it, wherever the step sits.
	if err := postgres.MigrateProbes(ctx, pool, 10, 20, 40); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("steps 10, 20, 40 over a schema holding 30 = %v, want ErrSchemaTooNew", err)
	}
	if err := postgres.Migrate(ctx, pool); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Migrate over a schema holding steps it does not know = %v, want ErrSchemaTooNew", err)
	}
}

// Migrate creates the watch-list and plan tables, and adds them to a schema an older
// release left without them, keeping its data.
func TestMigrateAddsWatchlistAndPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, table := range []string{"rota_watchlist", "rota_plans"} {
		if !tableExists(t, pool, table) {
			t.Fatalf("Migrate did not create %s", table)
		}
	}
	idx := postgres.NewIndex(pool)
	schedule(t, idx, "u", "k", t0)
	if _, err := pool.Exec(ctx, `DROP TABLE rota_watchlist, rota_plans;
		DELETE FROM rota_schema_migrations WHERE version = 4`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate of a schema without the watch list: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Contains(got, 4) {
		t.Fatalf("the schema records %v, want step 4", got)
	}
	tc := mustTC(t, "u")
	if err := postgres.NewEntitlements(pool).SetPlan(ctx, tc, "pro"); err != nil {
		t.Fatalf("after the upgrade SetPlan: %v", err)
	}
	if _, err := idx.Get(ctx, tc, "k"); err != nil {
		t.Fatalf("after the upgrade the due entry is gone: %v", err)
	}
}

// Step 6 (flow control) upgrades a populated schema of step 5 in place and loses nothing:
// every entry and claim survives, each user's Turn stays what it was (zero limits, the
// stride position starting at LastServed), claims go on counting, and limits routed after
// the upgrade hold at once over the claims made before it.
func TestMigrateAddsFlowControl(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.MigrateTo(ctx, pool, 5); err != nil {
		t.Fatal(err)
	}
	s := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
	// The rows as step 5's Index keeps them: amy served at 10s with two entries, one of
	// them claimed until 30s; bo never served, one entry due at 20s; cy served, no entries.
	if _, err := pool.Exec(ctx, `
		INSERT INTO rota_due (user_id, work_key, tier, due_at, last_run_at, miss_streak, claim_token, claim_until) VALUES
			('amy', 'a', 'hot', $1, NULL, 2, NULL, NULL),
			('amy', 'b', 'cold', $2, $1, 0, nextval('rota_claim_token'), $3),
			('amy', 'c', 'cold', $2, NULL, 0, nextval('rota_claim_token'), $4),
			('bo', 'd', '', $4, NULL, 0, NULL, NULL)`,
		s(-5), s(-1), s(30), s(20)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO rota_users (user_id, group_name, last_served, free_at, claim_end_at, turn) VALUES
			('amy', 'pro', $1, $2, $3, $1), ('bo', '', NULL, $3, NULL, $3), ('cy', 'free', $4, NULL, NULL, NULL)`,
		s(10), s(-5), s(20), s(50)); err != nil {
		t.Fatal(err)
	}
	before := map[string]duework.UserState{}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from step 5: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Contains(got, 6) {
		t.Fatalf("the schema records %v, want step 6", got)
	}
	checkReadyAt(t, pool)
	idx := postgres.NewIndex(pool)
	for _, w := range []struct {
		user, group string
		served      time.Time
		turn        time.Time
		inFlight    int
	}{{"amy", "pro", s(10), s(10), 2}, {"bo", "", time.Time{}, s(20), 0}, {"cy", "free", s(50), time.Time{}, 0}} {
		st, err := idx.User(ctx, w.user, s(0))
		if err != nil || st.Group != w.group || !st.LastServed.Equal(w.served) || !st.Turn.Equal(w.turn) || st.InFlight != w.inFlight || st.Limits != (duework.Limits{}) {
			t.Errorf("after the upgrade User(%s) = %+v, %v; want group %q, LastServed %s, Turn %s, %d in flight, zero limits",
				w.user, st, err, w.group, since(w.served), since(w.turn), w.inFlight)
		}
		before[w.user] = st
	}
	es, err := idx.Entries(ctx, "amy", "", 10)
	if err != nil || len(es) != 3 || !es[1].ClaimedUntil.Equal(s(30)) || !es[2].ClaimedUntil.Equal(s(20)) || es[0].Entry.MissStreak != 2 {
		t.Fatalf("after the upgrade Entries(amy) = %+v, %v", es, err)
	}
	// A cap of 2 routed now counts the two claims made before the upgrade: amy is not
	// ready until the first of them ends at 20s.
	route(t, idx, "amy", "pro", duework.Limits{MaxInFlight: 2})
	if st := userState(t, idx, "amy", s(0)); !st.Turn.Equal(s(20)) {
		t.Errorf("amy with a cap of 2 and two claims = %+v; want Turn t0+20s", st)
	}
	if cs, err := idx.Claim(ctx, []duework.Key{{UserID: "amy", WorkKey: "a"}}, s(15), s(60)); err != nil || len(cs) != 0 {
		t.Errorf("a claim beyond the cap after the upgrade = %v, %v; want none", cs, err)
	}
	if cs, err := idx.Claim(ctx, []duework.Key{{UserID: "amy", WorkKey: "a"}}, s(20), s(60)); err != nil || len(cs) != 1 {
		t.Errorf("a claim once a slot freed = %v, %v; want one", cs, err)
	}
	// A weight set now starts from the stride position the upgrade gave, LastServed.
	route(t, idx, "bo", "", duework.Limits{Weight: 4})
	if st := userState(t, idx, "bo", s(0)); !st.Turn.Equal(before["bo"].Turn) {
		t.Errorf("bo with weight 4 = %+v; want its Turn unchanged, %s", st, since(before["bo"].Turn))
	}
	checkReadyAt(t, pool)
}

// Step 9 (pauses, started claims, error streaks) upgrades a populated schema of step 8 in
// place and loses nothing: every entry and claim survives with an error streak of 0, each
// claim current and unstarted (StartClaims starts it once, and an unstarted one can still
// be handed back), every user's limits and Turn stay what they were and no one is paused;
// a pause written after the upgrade holds at once.
func TestMigrateAddsPauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.MigrateTo(ctx, pool, 8); err != nil {
		t.Fatal(err)
	}
	s := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
	// The rows as step 8's Index keeps them: amy served at 10s, capped at 2, with an entry
	// due at -5s and two claimed until 30s and 20s; bo never served, one entry due at 20s.
	var tokens [2]int64
	if err := pool.QueryRow(ctx, `WITH ins AS (
		INSERT INTO rota_due (user_id, work_key, tier, due_at, last_run_at, miss_streak, claim_token, claim_until) VALUES
			('amy', 'a', 'hot', $1, NULL, 2, NULL, NULL),
			('amy', 'b', 'cold', $2, $1, 0, nextval('rota_claim_token'), $3),
			('amy', 'c', 'cold', $2, NULL, 0, nextval('rota_claim_token'), $4),
			('bo', 'd', '', $4, NULL, 1, NULL, NULL)
		RETURNING work_key, claim_token)
		SELECT (SELECT claim_token FROM ins WHERE work_key = 'b'), (SELECT claim_token FROM ins WHERE work_key = 'c')`,
		s(-5), s(-1), s(30), s(20)).Scan(&tokens[0], &tokens[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO rota_users (user_id, group_name, last_served, pass, free_at, claim_end_at, slot_at, turn, max_in_flight) VALUES
			('amy', 'pro', $1, $1, $2, $3, $3, $3, 2), ('bo', '', NULL, NULL, $3, NULL, NULL, $3, 0)`,
		s(10), s(-5), s(20)); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from step 8: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Contains(got, 9) {
		t.Fatalf("the schema records %v, want step 9", got)
	}
	checkReadyAt(t, pool)
	idx := postgres.NewIndex(pool)
	amyLimits := duework.Limits{MaxInFlight: 2}
	for _, w := range []struct {
		user   string
		want   duework.UserState
		errors []int
	}{
		{"amy", duework.UserState{Group: "pro", Limits: amyLimits, LastServed: s(10), Turn: s(20), InFlight: 2}, []int{0, 0, 0}},
		{"bo", duework.UserState{Turn: s(20)}, []int{0}},
	} {
		st := userState(t, idx, w.user, s(0))
		if st.Group != w.want.Group || st.Limits != w.want.Limits || !st.LastServed.Equal(w.want.LastServed) || !st.Turn.Equal(w.want.Turn) ||
			st.InFlight != w.want.InFlight || !st.PausedUntil.IsZero() || st.PauseReason != "" {
			t.Errorf("after the upgrade User(%s) = %+v; want %+v", w.user, st, w.want)
		}
		es, err := idx.Entries(ctx, w.user, "", 10)
		if err != nil || len(es) != len(w.errors) {
			t.Fatalf("after the upgrade Entries(%s) = %+v, %v", w.user, es, err)
		}
		for _, e := range es {
			if e.Entry.ErrorStreak != 0 {
				t.Errorf("after the upgrade %s's entry %s has ErrorStreak %d, want 0", w.user, e.Entry.WorkKey, e.Entry.ErrorStreak)
			}
		}
	}
	if ps, err := idx.Paused(ctx, s(0), "", 10); err != nil || len(ps) != 0 {
		t.Errorf("after the upgrade Paused = %v, %v; want none", ps, err)
	}
	// The claims made before the upgrade are current and unstarted: b starts once, and c,
	// unstarted, can be handed back.
	amy := mustTC(t, "amy")
	claimOf := func(work string, tok int64, until time.Time) duework.Unclaim {
		return duework.Unclaim{Tenant: amy, Claim: duework.Claim{Entry: duework.Entry{UserID: "amy", WorkKey: work}, Token: uint64(tok), Until: until}}
	}
	b, c := claimOf("b", tokens[0], s(30)), claimOf("c", tokens[1], s(20))
	errs, err := idx.StartClaims(ctx, []duework.Unclaim{b, b})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], duework.ErrClaimStarted) {
		t.Errorf("StartClaims of a claim made before the upgrade, twice = %v, %v; want nil, then ErrClaimStarted", errs, err)
	}
	errs, err = idx.Unclaim(ctx, []duework.Unclaim{b, c})
	if err != nil || !errors.Is(errs[0], duework.ErrClaimStarted) || errs[1] != nil {
		t.Errorf("Unclaim of the started b and the unstarted c = %v, %v; want ErrClaimStarted, nil", errs, err)
	}
	// A pause written now holds at once.
	if err := idx.Pause(ctx, mustTC(t, "bo"), s(100), "operator"); err != nil {
		t.Fatal(err)
	}
	if cs, err := idx.Claim(ctx, []duework.Key{{UserID: "bo", WorkKey: "d"}}, s(50), s(60)); err != nil || len(cs) != 0 {
		t.Errorf("a claim of bo's entry while she is paused = %v, %v; want none", cs, err)
	}
	if st := userState(t, idx, "bo", s(50)); !st.PausedUntil.Equal(s(100)) || st.PauseReason != "operator" || !st.Turn.Equal(s(100)) {
		t.Errorf("bo after a pause until t0+100s = %+v", st)
	}
	checkReadyAt(t, pool)
}
