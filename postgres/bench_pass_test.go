package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
)

// The statements of a design BenchmarkFairCycleWriteTimePass measures and rota does not
// use: a fair order fixed when an entry is written, as Temporal's matching service gives
// each task a pass. Every unclaimed entry carries its pass, the instant from which it may
// be claimed in fair order; a user's next entry gets the later of its DueAt and the user's
// last pass plus a stride, so a user with many entries due has them spread out and the
// others come in between. A claim is then a first-come claim in pass order, and touches no
// user row; each write of an entry (here, the completion) reads and writes its user's last
// pass instead.
const (
	// passStride is how far apart a user's successive entries are put in pass order.
	passStride = time.Second

	// sqlPassColumns and sqlPasses add the passes to noisyFixture's schema: the noisy user's
	// j-th entry gets $1 + j strides, a quiet user's its due_at.
	sqlPassColumns = `ALTER TABLE rota_due ADD COLUMN pass timestamptz;
ALTER TABLE rota_users ADD COLUMN last_pass timestamptz`
	sqlPasses = `UPDATE rota_due SET pass = CASE WHEN user_id = 'noisy' THEN $1::timestamptz + ltrim(work_key, 'w')::bigint * $2::interval ELSE due_at END`

	// sqlPassClaim is sqlFirstCome in pass order: the design's whole fair claim.
	sqlPassClaim = `
UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $2
FROM (SELECT user_id, work_key FROM rota_due
      WHERE claim_until IS NULL AND pass <= $1
      ORDER BY pass, user_id, work_key LIMIT 1000 FOR UPDATE SKIP LOCKED) c
WHERE d.user_id = c.user_id AND d.work_key = c.work_key
RETURNING d.user_id, d.work_key, d.claim_token, d.due_at, d.pass`

	// sqlPassComplete completes claims as sqlCompleteMany does (next due_at, claim ended),
	// and gives each entry its next pass from its user's last pass, which it locks (users
	// in UserID order) and moves on. last_pass is in no index, so that write can be HOT.
	sqlPassComplete = `
WITH k AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[]) WITH ORDINALITY AS k(user_id, work_key, token, due_at, ord)
), u AS MATERIALIZED (
	SELECT u.user_id, u.last_pass FROM rota_users u
	WHERE u.user_id = ANY(ARRAY(SELECT DISTINCT k.user_id FROM k ORDER BY 1))
	ORDER BY u.user_id FOR NO KEY UPDATE
), p AS (
	SELECT k.*, greatest(k.due_at, u.last_pass + $5::interval * row_number() OVER (PARTITION BY k.user_id ORDER BY k.due_at, k.work_key)) AS pass
	FROM k JOIN u ON u.user_id = k.user_id
), c AS (
	UPDATE rota_due d SET due_at = p.due_at, pass = p.pass, claim_token = NULL, claim_until = NULL
	FROM p WHERE d.user_id = p.user_id AND d.work_key = p.work_key AND d.claim_token = p.token
	RETURNING p.ord, d.user_id, d.pass
), w AS (
	UPDATE rota_users u SET last_pass = m.pass
	FROM (SELECT c.user_id, max(c.pass) AS pass FROM c GROUP BY c.user_id) m WHERE u.user_id = m.user_id
)
SELECT c.ord FROM c`

	// sqlPassPutBack puts entries back as they were before a cycle claimed and completed
	// them: due_at, pass (kept where $4 is NULL), no claim.
	sqlPassPutBack = `
UPDATE rota_due d SET due_at = r.due_at, pass = coalesce(r.pass, d.pass), claim_token = NULL, claim_until = NULL
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS r(user_id, work_key, due_at, pass)
WHERE d.user_id = r.user_id AND d.work_key = r.work_key`
)

// passed is one entry a cycle claimed: its key, its claim's token, and its due_at and pass
// before the cycle (pass nil for the turn queues, which do not write it).
type passed struct {
	user, work string
	token      int64
	due        time.Time
	pass       *time.Time
}

// A fair cycle and its completion in a design rota does not use — a fair order fixed when
// an entry is written (the pass of the statements above) — against today's turn queues,
// on BenchmarkFairCycleVsFirstCome's users=1000 data. Each iteration runs, everything put
// back untimed in between:
//
//   - the first-come claim of 1,000 entries;
//   - a fair cycle (Dispatch), then Index.CompleteMany of its 1,000 claims, each next due an
//     hour later: the turn queues' claim and completion;
//   - sqlPassClaim of 1,000 entries, then sqlPassComplete of them: the design's.
//
// It is a lower bound of that design, not a working version: no lanes or groups (a pass
// order per lane would need the lane on every entry, and moving a user to another lane
// would rewrite all its entries), no PerUserLimit within a cycle, and no hold (none is
// needed: claims that skip locked entries already read disjoint ones). It answers what
// such a contract would buy: pass-claim/first-come is the cycle's bar,
// pass-complete/complete-many what every write pays for it, and pass/turn-queue the two
// together against today's cycle and completion. The after-outage shares are what the
// design gives up: the noisy user's share of its claim, and of a turn queue's cycle, after
// an hour in which nothing ran.
func BenchmarkFairCycleWriteTimePass(b *testing.B) {
	pool := noisyFixture(b, 1_000_000, 1_000)
	ctx := context.Background()
	for _, st := range []statement{
		{sqlPassColumns, nil},
		{sqlPasses, []any{t0, passStride}},
		{`CREATE INDEX rota_due_pass ON rota_due (pass, user_id, work_key) WHERE claim_until IS NULL`, nil},
		{`VACUUM ANALYZE rota_due`, nil},
	} {
		if _, err := pool.Exec(ctx, st.sql, st.args...); err != nil {
			b.Fatal(err)
		}
	}
	idx := postgres.NewIndex(pool)
	d, err := dispatch.New(idx, oneLane(10, 1000))
	if err != nil {
		b.Fatal(err)
	}
	var first, fair, complete, passClaim, passComplete time.Duration
	noisy, total := 0, 0
	for i := 0; b.Loop(); i++ {
		now := benchNow.Add(time.Duration(i) * time.Second)

		_, took := firstCome(b, pool, now)
		first += took
		releaseAll(b, pool)

		batch, took := fairCycle(b, d, now)
		fair += took
		complete += completeTurnQueue(b, idx, batch, now)
		var cycle []passed
		for _, it := range batch.Items {
			e := it.Claim.Entry
			cycle = append(cycle, passed{user: e.UserID, work: e.WorkKey, due: e.DueAt})
		}
		putBackPassed(b, pool, cycle)

		start := time.Now()
		cycle = claimByPass(b, pool, now)
		passClaim += time.Since(start)
		for _, p := range cycle {
			if p.user == "noisy" {
				noisy++
			}
		}
		total += len(cycle)
		passComplete += completeByPass(b, pool, cycle, now)
		putBackPassed(b, pool, cycle)
	}
	b.ReportMetric(float64(fair)/float64(first), "fair/first-come")
	b.ReportMetric(float64(passClaim)/float64(first), "pass-claim/first-come")
	b.ReportMetric(float64(passComplete)/float64(complete), "pass-complete/complete-many")
	b.ReportMetric(float64(passClaim+passComplete)/float64(fair+complete), "pass/turn-queue")
	b.ReportMetric(float64(noisy)/float64(total), "pass-noisy-share")
	pass, turn := noisyShareAfterOutage(b, pool, d)
	b.ReportMetric(pass, "pass-noisy-share-after-outage")
	b.ReportMetric(turn, "turn-noisy-share-after-outage")
}

// noisyShareAfterOutage is the noisy user's share of the design's claim, then of a fair
// cycle of the turn queues, right after an hour in which nothing ran: the quiet users'
// entries came due at its end, t0 + 1h, and that is their pass; the noisy user's entries
// keep the passes they were given, one a second from t0, and it was never served. In pass
// order its 3,600 entries of that hour come first; a turn queue's cycle gives it one item,
// as it gives every quiet user one.
func noisyShareAfterOutage(b *testing.B, pool *pgxpool.Pool, d *dispatch.Dispatcher) (pass, turn float64) {
	b.Helper()
	ctx := context.Background()
	end := t0.Add(time.Hour)
	if _, err := pool.Exec(ctx, `UPDATE rota_due SET pass = $1, due_at = $1 WHERE user_id <> 'noisy'`, end); err != nil {
		b.Fatal(err)
	}
	share := func(users []string) float64 {
		noisy := 0
		for _, u := range users {
			if u == "noisy" {
				noisy++
			}
		}
		return float64(noisy) / float64(len(users))
	}
	var users []string
	for _, p := range claimByPass(b, pool, end) {
		users = append(users, p.user)
	}
	pass = share(users)
	releaseAll(b, pool)

	if err := pool.QueryRow(ctx, `WITH u AS (UPDATE rota_users SET last_served = NULL RETURNING user_id)
		SELECT array_agg(user_id) FROM u`).Scan(&users); err != nil {
		b.Fatal(err)
	}
	// The quiet users' ReadyAt, then every Turn as if no user had ever been served.
	recompute(b, pool, users)
	if _, err := pool.Exec(ctx, `UPDATE rota_users SET turn = least(free_at, claim_end_at) WHERE turn IS NOT NULL`); err != nil {
		b.Fatal(err)
	}
	batch, _ := fairCycle(b, d, end)
	users = users[:0]
	for _, it := range batch.Items {
		users = append(users, it.Claim.Entry.UserID)
	}
	return pass, share(users)
}

// completeTurnQueue completes batch's claims with Index.CompleteMany, each next due an hour
// after now, and returns how long it took.
func completeTurnQueue(b *testing.B, idx *postgres.Index, batch dispatch.Batch, now time.Time) time.Duration {
	b.Helper()
	done := make([]duework.Done, len(batch.Items))
	for j, it := range batch.Items {
		next := it.Claim.Entry
		next.DueAt, next.LastRunAt = now.Add(time.Hour), now
		done[j] = duework.Done{Tenant: mustTC(b, next.UserID), Claim: it.Claim, Next: next}
	}
	start := time.Now()
	errs, err := idx.CompleteMany(context.Background(), done)
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return took
}

// claimByPass runs sqlPassClaim at now and returns the 1,000 entries it claimed.
func claimByPass(b *testing.B, pool *pgxpool.Pool, now time.Time) []passed {
	b.Helper()
	rows, err := pool.Query(context.Background(), sqlPassClaim, now, now.Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (passed, error) {
		var p passed
		err := r.Scan(&p.user, &p.work, &p.token, &p.due, &p.pass)
		return p, err
	})
	if err != nil || len(got) != 1000 {
		b.Fatalf("pass claim: %d rows, %v", len(got), err)
	}
	return got
}

// completeByPass completes the claims of cycle with sqlPassComplete, each next due an hour
// after now, and returns how long it took.
func completeByPass(b *testing.B, pool *pgxpool.Pool, cycle []passed, now time.Time) time.Duration {
	b.Helper()
	users, works := make([]string, len(cycle)), make([]string, len(cycle))
	tokens, due := make([]int64, len(cycle)), make([]time.Time, len(cycle))
	for j, p := range cycle {
		users[j], works[j], tokens[j], due[j] = p.user, p.work, p.token, now.Add(time.Hour)
	}
	start := time.Now()
	rows, err := pool.Query(context.Background(), sqlPassComplete, users, works, tokens, due, passStride)
	if err != nil {
		b.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	took := time.Since(start)
	if err != nil || len(got) != len(cycle) {
		b.Fatalf("pass complete: %d of %d, %v", len(got), len(cycle), err)
	}
	return took
}

// putBackPassed puts the entries of cycle back as they were (sqlPassPutBack), clears every
// user's last pass and hold, and recomputes the users' ReadyAt and Turn.
func putBackPassed(b *testing.B, pool *pgxpool.Pool, cycle []passed) {
	b.Helper()
	ctx := context.Background()
	users, works := make([]string, len(cycle)), make([]string, len(cycle))
	due, pass := make([]time.Time, len(cycle)), make([]*time.Time, len(cycle))
	for j, p := range cycle {
		users[j], works[j], due[j], pass[j] = p.user, p.work, p.due, p.pass
	}
	if _, err := pool.Exec(ctx, sqlPassPutBack, users, works, due, pass); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE rota_users SET last_pass = NULL, held_until = NULL WHERE last_pass IS NOT NULL OR held_until IS NOT NULL`); err != nil {
		b.Fatal(err)
	}
	recompute(b, pool, users)
}
