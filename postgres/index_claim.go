package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// sqlClaim is Claim's write, one statement and so one atomic step:
//
//   - k: among the given keys, it locks the rows visible at now (due, and unclaimed or their
//     claim ended) by primary key, skipping rows another transaction holds — so concurrent
//     dispatchers never wait for each other nor claim one entry twice; a row whose claim
//     another transaction committed meanwhile is re-checked by the lock (READ COMMITTED)
//     and dropped;
//   - c: it gives each a new token from the rota_claim_token sequence and its until;
//   - l: then it locks the rows of the users it claimed an entry for, in UserID order (one
//     index scan over the sorted array of their IDs, which waits for c), and names them in
//     the transaction-local setting rota.locked (sqlLocked) for sqlServe, next in the
//     batch, which stamps them; and those of them of which it claimed again an entry whose
//     claim had ended in rota.reclaimed.
//
// It cannot deadlock: its entry locks never wait (SKIP LOCKED), and its user locks are
// taken in UserID order after them.
const sqlClaim = `
WITH c AS (` + sqlClaimEntries + `), l AS (
	SELECT u.user_id FROM rota_users u
	WHERE u.user_id = ANY(ARRAY(SELECT DISTINCT c.user_id FROM c ORDER BY c.user_id))
	ORDER BY u.user_id FOR NO KEY UPDATE
)
SELECT c.user_id, c.work_key, c.tier, c.due_at, c.last_run_at, c.miss_streak, c.claim_token, c.claim_until FROM c
WHERE ` + sqlLocked + ` AND (SELECT set_config('rota.reclaimed',
	coalesce(array_agg(DISTINCT c.user_id) FILTER (WHERE c.ended IS NOT NULL), '{}')::text, true) FROM c) IS NOT NULL`

// sqlClaimEntries is sqlClaim's k and c: the claimed rows, each with the end of the claim it
// replaced (ended, NULL for an entry that was not claimed).
const sqlClaimEntries = `
	UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $4
	FROM (
		SELECT d.user_id, d.work_key, d.claim_until AS ended
		FROM unnest($1::text[], $2::text[]) AS k(user_id, work_key)
		JOIN rota_due d ON d.user_id = k.user_id AND d.work_key = k.work_key
		WHERE d.due_at <= $3 AND (d.claim_until IS NULL OR d.claim_until <= $3)
		FOR UPDATE OF d SKIP LOCKED
	) k
	WHERE d.user_id = k.user_id AND d.work_key = k.work_key
	RETURNING ` + entryColumns + `, d.claim_token, d.claim_until, k.ended
`

// sqlServe is the second statement of Claim, in the same batch as the first, so with a
// snapshot taken after the first one's locks. On each user that statement locked (named in
// rota.locked) it sets LastServed to the later of LastServed and $1 (Claim's now), ends the
// hold, and sets free_at, claim_end_at and turn: one write per user, on rows already
// locked, so it never waits.
//
// free_at is probed again (the claim took entries off the unclaimed ones). claim_end_at is
// the lesser of the stored one and $2 (until, the end of every claim the first statement
// made: each claimed entry was due by now, before until), except for the users of
// rota.reclaimed, whose stored claim_end_at may be the end of a claim that was just
// replaced, and which are probed again. The stored value is exact for everything but the
// first statement's own claims: every write to a user's entries sets it under the user's
// row lock, which this transaction now holds, and a writer still in flight sets it again
// after this one.
const sqlServe = `UPDATE rota_users u SET last_served = greatest(u.last_served, $1::timestamptz), held_until = NULL,
		free_at = n.free_at, claim_end_at = ` + claimEndAtServed + `,
		turn = greatest(least(n.free_at, ` + claimEndAtServed + `), u.last_served, $1::timestamptz)
	FROM (SELECT k.user_id, ` + freeAtOfK + ` AS free_at, k.user_id = ANY(current_setting('rota.reclaimed', true)::text[]) AS reclaimed,
			CASE WHEN k.user_id = ANY(current_setting('rota.reclaimed', true)::text[]) THEN ` + claimEndAtOfK + ` END AS claim_end_at
		FROM ` + lockedUsers + ` OFFSET 0) n
	WHERE u.user_id = n.user_id`

// claimEndAtServed is a served user's claim_end_at in sqlServe.
const claimEndAtServed = `CASE WHEN n.reclaimed THEN n.claim_end_at ELSE least(u.claim_end_at, $2::timestamptz) END`

// sqlLocked names, in the transaction-local setting rota.locked, the users l locked: the
// next statement of the batch finds them there (lockedUsers). It is the final SELECT's
// one-time filter, so it runs once, before the SELECT returns a row, and always.
const sqlLocked = `(SELECT set_config('rota.locked', coalesce(array_agg(l.user_id), '{}')::text, true) FROM l) IS NOT NULL`

// lockedUsers is the FROM item k(user_id) of the users sqlLocked named.
const lockedUsers = `unnest(current_setting('rota.locked', true)::text[]) AS k(user_id)`

// Claim claims, atomically, those of keys that are visible at now, until until, and
// returns their claims in the order of keys; for every user it claimed an entry of, it sets
// LastServed to the later of LastServed and now and ends the user's hold. Keys that are
// absent, invalid, not visible, given twice, or whose row a concurrent writer holds at that
// moment are skipped.
//
// It is one round trip: the claim itself (sqlClaim), then the claimed users (sqlServe). Stored
// times have microsecond precision: until is rounded up to the next microsecond, so a claim
// never ends before the until it was given.
func (x *Index) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if err := duework.ValidateClaimWindow(now, until); err != nil {
		return nil, err
	}
	users := make([]string, 0, len(keys))
	works := make([]string, 0, len(keys))
	ord := make(map[duework.Key]int, len(keys))
	for _, k := range keys {
		if _, dup := ord[k]; dup || !validKey(k) {
			continue
		}
		ord[k] = len(users)
		users = append(users, k.UserID)
		works = append(works, k.WorkKey)
	}
	if len(users) == 0 {
		return nil, ctx.Err()
	}
	var got []duework.Claim
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlClaim, users, works, now, ceilMicro(until))
	b.Queue(sqlServe, now, ceilMicro(until))
	err := x.sendBatch(ctx, b, func(rows pgx.Rows) error {
		var c duework.Claim
		var token int64
		e, err := scanEntry(rows, &token, &c.Until)
		c.Entry, c.Token = e, uint64(token)
		got = append(got, c)
		return err
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Claim", err)
	}
	// The rows come in no particular order: put them in the order of keys (each key once).
	slices.SortFunc(got, func(a, b duework.Claim) int { return cmp.Compare(ord[a.Entry.Key()], ord[b.Entry.Key()]) })
	return got, nil
}

// writeClaimed runs a write of tc's entry c.Entry.WorkKey that applies only while c is its
// current claim — sql's $1, $2 and $3 are the user, the work key and the token, args the
// rest — and returns duework.ErrClaimLost when it wrote nothing.
func (x *Index) writeClaimed(ctx context.Context, op string, tc tenancy.Context, c duework.Claim, sql string, args ...any) error {
	tok, err := token(op, c)
	if err != nil {
		return err
	}
	ifLost := func(n int64) error {
		if n == 0 {
			return lost(op, c)
		}
		return nil
	}
	return x.writeOne(ctx, op, tc.UserID(), false, ifLost, sql, append([]any{tc.UserID(), c.Entry.WorkKey, tok}, args...)...)
}

// token returns c's token as the server stores it, or ErrClaimLost for a token no claim
// of this Index ever had (0, or above the largest bigint).
func token(op string, c duework.Claim) (int64, error) {
	if c.Token == 0 || c.Token > 1<<63-1 {
		return 0, lost(op, c)
	}
	return int64(c.Token), nil
}

func lost(op string, c duework.Claim) error {
	return fmt.Errorf("postgres: %s: %w: entry %q token %d", op, duework.ErrClaimLost, c.Entry.WorkKey, c.Token)
}

// Complete replaces the claimed entry with next and ends the claim, or returns
// duework.ErrClaimLost and writes nothing when c is no longer the entry's current claim (a
// later claim replaced it, or the host rescheduled or unscheduled the entry). It succeeds
// past c.Until as long as no later claim was made.
func (x *Index) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	if err := duework.ValidateCompletion(tc, c, next); err != nil {
		return err
	}
	return x.writeClaimed(ctx, "Index.Complete", tc, c, `
		UPDATE rota_due SET tier = $4, due_at = $5, last_run_at = $6, miss_streak = $7,
			claim_token = NULL, claim_until = NULL
		WHERE user_id = $1 AND work_key = $2 AND claim_token = $3`,
		next.Tier, next.DueAt, ts(next.LastRunAt), next.MissStreak)
}

// sqlCompleteMany is CompleteMany's write, one statement for the whole batch:
//
//   - e: it locks the rows that still carry the claim of an item, in (UserID, WorkKey)
//     order, waiting for a row another transaction holds and re-checking the claim after
//     the wait (READ COMMITTED);
//   - c: it writes each item's next entry and ends its claim, returning the item's ordinal;
//   - l: then it locks the rows of the users it wrote for, in UserID order (one index scan
//     over the sorted array of their IDs, which waits for c), and names them in rota.locked
//     (sqlLocked) for sqlRecomputeLocked, next in the batch, which recomputes their
//     ReadyAt from a snapshot taken after the locks.
//
// It cannot deadlock: entries are locked in one global order, and users after every entry,
// in UserID order. Items are one per key and claim token (CompleteMany sends no key and
// token twice), so no row is written twice.
const sqlCompleteMany = `
WITH k AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::bigint[])
		WITH ORDINALITY AS k(user_id, work_key, token, tier, due_at, last_run_at, miss_streak, ord)
), e AS (
	SELECT d.ctid AS tid, k.* FROM k JOIN rota_due d
		ON d.user_id = k.user_id AND d.work_key = k.work_key AND d.claim_token = k.token
	ORDER BY d.user_id, d.work_key
	FOR UPDATE OF d
), c AS (
	UPDATE rota_due d SET tier = e.tier, due_at = e.due_at, last_run_at = e.last_run_at,
		miss_streak = e.miss_streak, claim_token = NULL, claim_until = NULL
	FROM e WHERE d.ctid = e.tid
	RETURNING e.ord, d.user_id
), l AS (
	SELECT u.user_id FROM rota_users u
	WHERE u.user_id = ANY(ARRAY(SELECT DISTINCT c.user_id FROM c ORDER BY c.user_id))
	ORDER BY u.user_id FOR NO KEY UPDATE
)
SELECT c.ord FROM c WHERE ` + sqlLocked

// CompleteMany completes every item of done as Complete would, in one round trip: one
// statement writes the whole batch (sqlCompleteMany), a second (sqlRecomputeLocked) its
// users' ReadyAt. errs[i] is item i's outcome: nil, duework.ErrClaimLost, or the
// validation error (duework.ErrInvalid, tenancy.ErrNoTenant) of an item refused before
// anything was sent. An item whose key and token an earlier item of the batch already named
// gets ErrClaimLost, as it would one after another. When err is not nil, nothing was
// written: the batch is one transaction.
func (x *Index) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs := make([]error, len(done))
	type sent struct {
		key   duework.Key
		token int64
	}
	seen := make(map[sent]bool, len(done))
	ords := make([]int, 0, len(done)) // ords[j]: the item of done that row j of the arrays is
	var (
		users, works, tiers []string
		tokens, streaks     []int64
		due                 []time.Time
		last                []*time.Time
	)
	for i, d := range done {
		if err := duework.ValidateCompletion(d.Tenant, d.Claim, d.Next); err != nil {
			errs[i] = err
			continue
		}
		tok, err := token("Index.CompleteMany", d.Claim)
		if err != nil {
			errs[i] = err
			continue
		}
		s := sent{d.Claim.Entry.Key(), tok}
		if seen[s] {
			errs[i] = lost("Index.CompleteMany", d.Claim)
			continue
		}
		seen[s] = true
		ords = append(ords, i)
		users = append(users, d.Next.UserID)
		works = append(works, d.Next.WorkKey)
		tokens = append(tokens, tok)
		tiers = append(tiers, d.Next.Tier)
		due = append(due, d.Next.DueAt)
		last = append(last, ts(d.Next.LastRunAt))
		streaks = append(streaks, int64(d.Next.MissStreak))
	}
	if len(ords) == 0 {
		return errs, nil
	}
	written := make([]bool, len(ords))
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlCompleteMany, users, works, tokens, tiers, due, last, streaks)
	b.Queue(sqlRecomputeLocked)
	err := x.sendBatch(ctx, b, func(rows pgx.Rows) error {
		var j int64
		err := rows.Scan(&j)
		if err == nil {
			written[j-1] = true // WITH ORDINALITY counts from 1
		}
		return err
	})
	if err != nil {
		return nil, interpret(ctx, "Index.CompleteMany", err)
	}
	for j, i := range ords {
		if !written[j] {
			errs[i] = lost("Index.CompleteMany", done[i].Claim)
		}
	}
	return errs, nil
}

// CheckClaim returns nil while c is the current claim of tc's entry c.Entry.WorkKey, and
// duework.ErrClaimLost otherwise. It reads one row by its primary key and writes nothing.
func (x *Index) CheckClaim(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if err := duework.ValidateClaim(tc, c); err != nil {
		return err
	}
	tok, err := token("Index.CheckClaim", c)
	if err != nil {
		return err
	}
	var one int
	err = x.pool.QueryRow(ctx, `SELECT 1 FROM rota_due WHERE user_id = $1 AND work_key = $2 AND claim_token = $3`,
		tc.UserID(), c.Entry.WorkKey, tok).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return lost("Index.CheckClaim", c)
	}
	return interpret(ctx, "Index.CheckClaim", err)
}

// UnscheduleClaimed removes tc's entry c.Entry.WorkKey while c is its current claim, and
// otherwise returns duework.ErrClaimLost and removes nothing.
func (x *Index) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if err := duework.ValidateClaim(tc, c); err != nil {
		return err
	}
	return x.writeClaimed(ctx, "Index.UnscheduleClaimed", tc, c,
		`DELETE FROM rota_due WHERE user_id = $1 AND work_key = $2 AND claim_token = $3`)
}
