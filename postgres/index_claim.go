package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Claim is four statements in one batch, so one round trip and one transaction: the plan
// settings, then three that take one of two paths, chosen by the first of them:
//
//   - sqlClaimLock looks the users of the keys up in rota_users_limited and
//     rota_users_paused, which hold only the users with limits or a pause. When any of them
//     has a cap, a rate or a weight, or is paused at now (limitedAt), it takes the locked
//     path: it locks all of them, in UserID order (sqlLockUsers' scan), names the limited
//     ones, with their limits, rate mark and pause as the locks return them (the latest
//     committed), in transaction-local settings (rota.lim_*), and bounds how long the next
//     statement waits for an entry another transaction holds (lock_timeout lockedWait,
//     unless skip). Otherwise it takes the free path: it locks no user and names none
//     (rota.fast);
//   - sqlClaim, with a snapshot taken after those locks — so it sees every claim of the
//     locked users committed before it — decides each limited user's allowance at now
//     (the least of its free slots and its rate allowance, none while it is paused), and
//     claims, for each user, its first rows in the order of the keys that are visible at
//     now, up to its allowance. When no user is limited it claims every key's row that is
//     visible at now. Either way each row is locked as it is written, in (UserID, WorkKey)
//     order when no user is limited: it waits for a row another transaction holds and
//     claims it only if it is still visible after that write (READ COMMITTED). On the
//     locked path that wait ends after lockedWait with an error, and Claim runs again on
//     the locked path with skip, which locks the visible rows first with SKIP LOCKED,
//     passing over those another transaction holds. On the free path it then locks the
//     users it claimed for, after their entries, in UserID order, and fails the call
//     (errLimitsChanged) when one of them is limited now: a cap, a rate, a weight or a
//     pause committed after sqlClaimLock read it. Claim then runs again on the locked
//     path, so every limit committed before a user's lock holds. It names the users it
//     claimed for in rota.locked — on the locked path with their caps and their number
//     of claims — for
//   - sqlServe, which stamps them, with a snapshot taken after every lock of the call.
//
// A concurrent Claim of the same user waits for the first one's user lock and then sees
// its claims, so the limits hold whoever claims: no stale or concurrent claimer passes a
// cap or a rate, and none claims for a user whose Pause committed before the lock. A
// concurrent Complete or Unclaim that the snapshot does not see yet only makes the
// in-flight count one too high for this call, never too low. The statements cannot
// deadlock: on the locked path the user locks are taken first, in UserID order, and an
// entry lock waits at most lockedWait, or not at all (SKIP LOCKED), so a writer of the
// entry that waits for one of those users gets it; on the free path the entries are
// locked in (UserID, WorkKey) order, holding no user, and the users after them, in
// UserID order, as every writer of entries locks them.
//
// The free path is what a user without limits costs: its row is locked only from the end
// of the claim to the commit, while it is stamped, so that the writes of its other entries
// (a Runner's completions, Schedule) and the claim wait for each other only that long.
//
// sqlClaimLock's aggregates filter the limited users rather than a WHERE on l, which the
// planner would push down into l, leaving the users it dropped unlocked; $3 false forces
// the locked path.
var sqlClaimLock = `WITH f AS MATERIALIZED (
	SELECT $3::bool AND NOT EXISTS (SELECT FROM rota_users v WHERE v.user_id = ANY($1::text[]) AND (` + hasLimits("v") + `))
		AND NOT EXISTS (SELECT FROM rota_users v WHERE v.user_id = ANY($1::text[]) AND v.paused_until IS NOT NULL
			AND ` + pausedAt("v.paused_until", "v.last_served", "$2::timestamptz") + `) AS fast
)
SELECT set_config('rota.fast', (SELECT f.fast FROM f)::text, true) ||
	set_config('rota.lim_users', coalesce(array_agg(l.user_id) FILTER (WHERE l.limited), '{}')::text, true) ||
	set_config('rota.lim_caps', coalesce(array_agg(l.max_in_flight) FILTER (WHERE l.limited), '{}')::text, true) ||
	set_config('rota.lim_every', coalesce(array_agg(l.every) FILTER (WHERE l.limited), '{}')::text, true) ||
	set_config('rota.lim_burst', coalesce(array_agg(l.burst) FILTER (WHERE l.limited), '{}')::text, true) ||
	set_config('rota.lim_mark', coalesce(array_agg(l.rate_mark) FILTER (WHERE l.limited), '{}')::text, true) ||
	set_config('rota.lim_paused', coalesce(array_agg(l.paused) FILTER (WHERE l.limited), '{}')::text, true) ||
	set_config('lock_timeout', CASE WHEN (SELECT f.fast FROM f) OR $4::bool THEN current_setting('lock_timeout') ELSE '` + lockedWait + `' END, true)
FROM (SELECT u.user_id, u.max_in_flight, u.every, u.burst, u.rate_mark, ` + pausedAt("u.paused_until", "u.last_served", "$2::timestamptz") + ` AS paused,
		` + limitedAt("u", "$2::timestamptz") + ` AS limited
	FROM rota_users u WHERE u.user_id = ANY($1::text[]) AND NOT (SELECT f.fast FROM f)
	ORDER BY u.user_id FOR NO KEY UPDATE) l`

// lockedWait is how long a Claim on the locked path waits for an entry another
// transaction holds before it claims again, passing such entries over.
const lockedWait = "1ms"

// errLockTimeout reports whether err is a lock wait that lock_timeout ended: on Claim's
// locked path, sqlClaim's wait for an entry (see sqlClaimLock).
func errLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03" // lock_not_available
}

// limitsChanged is the name of a setting nothing sets: reading it is how sqlClaim fails
// the call, with an error that names it (errLimitsChanged).
const limitsChanged = "rota.limits_changed_during_claim"

// errLimitsChanged reports whether err is sqlClaim's failure on the free path: a user it
// claimed for was limited by the time it was locked.
func errLimitsChanged(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704" && strings.Contains(pgErr.Message, limitsChanged) // undefined_object
}

// limitedAt is whether the user row u has a cap, a rate or a weight, or is paused at now:
// a user Claim decides for under its lock.
func limitedAt(u, now string) string {
	return hasLimits(u) + " OR " + pausedAt(u+".paused_until", u+".last_served", now)
}

// hasLimits is whether the user row u has a cap, a rate or a weight: the predicate of
// rota_users_limited, written as it is there so that the planner reads that index.
func hasLimits(u string) string {
	return u + ".max_in_flight > 0 OR " + u + ".every > 0 OR " + u + ".weight > 1"
}

// sqlClaim is Claim's claiming statement (see above): $1 and $2 the keys' users and work
// keys, $3 now, $4 until, $5 now in nanoseconds (nanosOf), $6 whether the claims are
// written started (claims for a localstart.Set), $7 skip.
//
//   - lim: each limited user's allowance, from rota.lim_* and, for a user with a cap, its
//     in-flight count (one index entry per claim in flight); none for a paused user;
//   - q: the keys sorted by (UserID, WorkKey), byte by byte as the primary key orders
//     them, each with its place in $1 and $2 (ord, from 1);
//   - k, on the locked path with skip only: q's rows visible at now, locked FOR UPDATE
//     SKIP LOCKED by primary key; a row whose claim another transaction committed
//     meanwhile is re-checked by the lock (READ COMMITTED) and dropped; v, on the locked
//     path without skip: the same rows, unlocked;
//   - r: k or v and lim sorted together by user, each user's lim row first, so that a window
//     over the sort gives each key its user's allowance and its place among the user's
//     visible keys, in the order of the keys, with no join;
//   - c: the keys within their users' allowances get a new token from rota_claim_token and
//     their until, each row locked by its write (already, with skip) and re-checked after
//     a wait; with skip, the others stay locked until the end of the call, unclaimed. When
//     no user of the call is limited, r, k and v are never run: c writes q's rows that are
//     visible at now, joined by a nested loop with q outside (hash and merge joins are
//     off, sqlPlanSettings), so it locks each as it writes it, in q's order, with no lock
//     of its own before the write. Each claim comes back with its key's ord;
//   - served: the users c claimed for, with, on the locked path, their caps, their number
//     of claims and whether any has a rate or a weight (heavy), which the one-time
//     filters of the final SELECT name for sqlServe (rota.locked, rota.caps, rota.claimed,
//     rota.heavy; on the free path only rota.locked, sqlServe reading the others as NULL);
//   - l, on the free path only, after c (served waits for it): the rows of those users,
//     locked in UserID order (one index scan of the primary key, which sorts the array's
//     IDs before it reads them), whether each is limited at now; the second one-time
//     filter fails the call when one is.
var sqlClaim = `
WITH lim AS MATERIALIZED (
	SELECT l.user_id, l.m, CASE WHEN l.paused THEN 0 ELSE least(` + slotAllowance("l.m", inFlight("l.user_id", "$3::timestamptz")) + `,
		` + rateAllowance("l.mark", "l.every", "l.burst", "$5::numeric") + `) END AS allow
	FROM unnest(current_setting('rota.lim_users', true)::text[], current_setting('rota.lim_caps', true)::int[],
		current_setting('rota.lim_every', true)::bigint[], current_setting('rota.lim_burst', true)::int[],
		current_setting('rota.lim_mark', true)::numeric[], current_setting('rota.lim_paused', true)::bool[])
		AS l(user_id, m, every, burst, mark, paused)
), q AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS q(user_id, work_key, ord)
	ORDER BY q.user_id COLLATE "C", q.work_key COLLATE "C"
), k AS MATERIALIZED (
	SELECT d.user_id, d.work_key, q.ord
	FROM q JOIN rota_due d ON d.user_id = q.user_id AND d.work_key = q.work_key
	WHERE d.due_at <= $3 AND (d.claim_until IS NULL OR d.claim_until <= $3) AND $7
	FOR UPDATE OF d SKIP LOCKED
), v AS (
	SELECT d.user_id, d.work_key, q.ord
	FROM q JOIN rota_due d ON d.user_id = q.user_id AND d.work_key = q.work_key
	WHERE d.due_at <= $3 AND (d.claim_until IS NULL OR d.claim_until <= $3) AND NOT $7
), r AS (
	SELECT x.user_id, x.work_key, x.ord, x.head, first_value(x.allow) OVER w AS allow, first_value(x.m) OVER w AS m,
		first_value(x.head) OVER w AS heavy, row_number() OVER w - CASE WHEN first_value(x.head) OVER w THEN 1 ELSE 0 END AS n
	FROM (SELECT k.user_id, k.work_key, k.ord, false AS head, NULL::numeric AS allow, 0 AS m FROM k
		UNION ALL
		SELECT v.user_id, v.work_key, v.ord, false, NULL, 0 FROM v
		UNION ALL
		SELECT lim.user_id, NULL, 0, true, lim.allow, lim.m FROM lim) x
	WINDOW w AS (PARTITION BY x.user_id ORDER BY x.head DESC, x.ord)
), c AS (
	UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $4, claim_started = $6
	FROM (SELECT q.user_id, q.work_key, q.ord, 0 AS m, false AS heavy FROM q WHERE NOT EXISTS (SELECT FROM lim)
		UNION ALL
		SELECT r.user_id, r.work_key, r.ord, r.m, r.heavy FROM r
		WHERE EXISTS (SELECT FROM lim) AND NOT r.head AND (r.allow IS NULL OR r.n <= r.allow)) s
	WHERE d.user_id = s.user_id AND d.work_key = s.work_key AND d.due_at <= $3 AND (d.claim_until IS NULL OR d.claim_until <= $3)
	RETURNING ` + entryColumns + `, d.claim_token, d.claim_until, s.ord, s.m, s.heavy
), served AS MATERIALIZED (
	SELECT c.user_id, max(c.m) AS m, count(*) AS k, bool_or(c.heavy) AS heavy FROM c GROUP BY c.user_id
), l AS (
	SELECT ` + limitedAt("u", "$3::timestamptz") + ` AS limited FROM rota_users u
	WHERE u.user_id = ANY(ARRAY(SELECT s.user_id FROM served s)) AND current_setting('rota.fast', true)::bool
	ORDER BY u.user_id FOR NO KEY UPDATE
)
SELECT c.user_id, c.work_key, c.tier, c.due_at, c.last_run_at, c.miss_streak, c.error_streak, c.claim_token, c.claim_until, c.ord FROM c
WHERE (SELECT set_config('rota.locked', coalesce(array_agg(s.user_id), '{}')::text, true) ||
	set_config('rota.caps', coalesce(array_agg(s.m) FILTER (WHERE EXISTS (SELECT FROM lim)), '{}')::text, true) ||
	set_config('rota.claimed', coalesce(array_agg(s.k) FILTER (WHERE EXISTS (SELECT FROM lim)), '{}')::text, true) ||
	set_config('rota.heavy', coalesce(array_agg(s.heavy) FILTER (WHERE EXISTS (SELECT FROM lim)), '{}')::text, true)
	FROM served s) IS NOT NULL
  AND (SELECT CASE WHEN bool_or(l.limited) THEN current_setting('` + limitsChanged + `') END FROM l) IS NULL`

// sqlServe is the last statement of Claim ($1 now, $2 until, $3 now in nanoseconds), with
// a snapshot that sees sqlClaim's claims. On each user sqlClaim claimed for (rota.locked,
// with its cap and its number of claims k, which are NULL on the free path, where no user
// has a cap, a rate or a weight), all locked before, it sets LastServed to the later of
// LastServed and now, ends the hold, moves the rate mark (newMark) and the stride position
// (newPass, from the Turn before the call), drops its pause once it no longer counts (a
// user is claimed only when not paused, so a pause ends with the serve), and sets free_at,
// claim_end_at, slot_at and turn: one write per user, on rows already locked, so it never
// waits. For a user with a
// rate or a weight (rota.heavy) the new mark and pass are computed once each, in
// subqueries of their own over its row (OFFSET 0 keeps the planner from folding them into
// the expressions that use them); every other user's pass simply moves to now.
//
// free_at is probed again (the claim took entries off the unclaimed ones), and slot_at
// when the user has a cap. claim_end_at is the lesser of the stored one and $2 (until, the
// end of every claim the call made: each claimed entry was due by now, before until),
// unless the stored one is not after now: the user then had a claim that had ended, which
// this call may have claimed again, so that the stored value may be the end of a claim
// that was just replaced, and it is probed again. The stored value is exact for
// everything but this call's own claims: every write to a user's entries sets it under
// the user's row lock, which this transaction holds, and a writer still in flight sets it
// again after this one.
var sqlServe = `UPDATE rota_users u SET last_served = greatest(u.last_served, $1::timestamptz), held_until = NULL,
		free_at = n.free_at, claim_end_at = ` + claimEndAtServed + `, slot_at = n.slot_at,
		rate_mark = CASE WHEN n.heavy THEN n.mark ELSE u.rate_mark END, pass = ` + passServed + `,
		paused_until = ` + pausedServed + `, pause_reason = CASE WHEN ` + pausedServed + ` IS NULL THEN '' ELSE u.pause_reason END,
		turn = greatest(least(n.free_at, ` + claimEndAtServed + `), n.slot_at, CASE WHEN n.bound IS NOT NULL THEN ` + tsCeil("n.bound") + ` END,
			` + pausedServed + `, ` + passServed + `)
	FROM (SELECT k.user_id, k.heavy, ` + freeAtOfK + ` AS free_at, ` + slotAt("k.user_id", "k.m") + ` AS slot_at,
			h.mark, h.pass, h.bound
		FROM unnest(current_setting('rota.locked', true)::text[], current_setting('rota.caps', true)::int[],
			current_setting('rota.claimed', true)::bigint[],
			current_setting('rota.heavy', true)::bool[]) AS k(user_id, m, k, heavy)
		LEFT JOIN LATERAL (SELECT a.mark, b.pass, b.bound FROM rota_users o
			CROSS JOIN LATERAL (SELECT ` + newMark("o.rate_mark", "o.every", "k.k", "$3::numeric") + ` AS mark,
				CASE WHEN o.weight > 1 AND k.k < o.weight THEN ` + strideStart("o.turn", "o.last_served", "o.weight", "$1::timestamptz") + ` ELSE o.turn END AS t
				OFFSET 0) a
			CROSS JOIN LATERAL (SELECT ` + newPass("o.pass", "a.t", "o.weight", "k.k", "$1::timestamptz") + ` AS pass,
				` + rateBound("a.mark", "o.every", "o.burst") + ` AS bound OFFSET 0) b
			WHERE k.heavy AND o.user_id = k.user_id OFFSET 0) h ON true
		OFFSET 0) n
	WHERE u.user_id = n.user_id`

// claimEndAtServed, passServed and pausedServed are a served user's new claim_end_at,
// stride position and pause in sqlServe; the probe of claim_end_at runs only for a user
// whose stored one is not after now, a user of weight 1 moves its pass to now, and a
// pause that the serve ends is dropped.
var (
	claimEndAtServed = `CASE WHEN u.claim_end_at <= $1::timestamptz THEN ` + claimEndAtOf("u.user_id") + ` ELSE least(u.claim_end_at, $2::timestamptz) END`
	passServed       = `CASE WHEN n.heavy THEN n.pass ELSE greatest(u.pass, $1::timestamptz) END`
	pausedServed     = pauseOf("u.paused_until", "greatest(u.last_served, $1::timestamptz)")
)

// Claim claims, atomically, those of keys that are visible at now and that their users'
// limits allow, until until, and returns their claims in the order of keys; for every
// user it claimed an entry of, it sets LastServed to the later of LastServed and now,
// moves the user's rate mark and stride position, and ends the user's hold. Keys that are
// absent, invalid, not visible, beyond a limit or given twice are skipped, and so, when a
// user of keys has a limit or a pause, are keys whose row a concurrent writer holds at
// that moment; when none has, Claim waits for such a row and claims it if it is still
// visible after that write. A user's keys count against its limits in the order they are
// given.
//
// It is one round trip (see sqlClaimLock): the users' locks, the claim, then the claimed
// users. Stored times have microsecond precision: until is rounded up to the next
// microsecond, so a claim never ends before the until it was given.
//
// When ctx carries the set of local starts of a bridge.Runner (package
// internal/localstart), whose items never leave its process, the claims are written
// started and put in that set: StartClaims and Unclaim under that set treat them as not
// started yet, and every other call finds them started (see StartClaims).
func (x *Index) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if err := vocab.ClaimWindow(duework.ErrInvalid, now, until); err != nil {
		return nil, err
	}
	users := make([]string, 0, len(keys))
	works := make([]string, 0, len(keys))
	seen := make(map[duework.Key]struct{}, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; dup || !validKey(k) {
			continue
		}
		seen[k] = struct{}{}
		users = append(users, k.UserID)
		works = append(works, k.WorkKey)
	}
	if len(users) == 0 {
		return nil, ctx.Err()
	}
	local := localstart.From(ctx)
	got, err := x.claim(ctx, users, works, now, until, true, local != nil, false)
	if errLimitsChanged(err) {
		got, err = x.claim(ctx, users, works, now, until, false, local != nil, false)
	}
	if errLockTimeout(err) {
		got, err = x.claim(ctx, users, works, now, until, false, local != nil, true)
	}
	if err != nil {
		return nil, interpret(ctx, "Index.Claim", err)
	}
	local.Add(now, got)
	return got, nil
}

// claim runs Claim's batch for the keys (users[i], works[i]), each given once, on the free
// path when free allows it (see sqlClaimLock), and returns the claims in the order of the
// keys; with started, the claims are written started; with skip (on the locked path), the
// keys' rows are locked first with SKIP LOCKED, passing over those another transaction
// holds, rather than each locked by its write (see sqlClaim).
func (x *Index) claim(ctx context.Context, users, works []string, now, until time.Time, free, started, skip bool) ([]duework.Claim, error) {
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings + sqlSortOff)
	b.Queue(sqlClaimLock, validUsers(users), now, free, skip)
	nowNs := nanosOf(now)
	b.Queue(sqlClaim, users, works, now, ceilMicro(until), nowNs, started, skip)
	b.Queue(sqlServe, now, ceilMicro(until), nowNs)
	// The rows come in no particular order, each with its key's place (ord): they are put
	// in their places, then closed up. The row's user ID and tier, which repeat, are read
	// from its bytes (one string each).
	byKey := make([]duework.Claim, len(users))
	has := make([]bool, len(users))
	var (
		ids, tiers               internSet
		c                        duework.Claim
		last                     pgtype.Timestamptz
		streak, errs, token, ord int64
	)
	dest := []any{nil, &c.Entry.WorkKey, nil, &c.Entry.DueAt, &last, &streak, &errs, &token, &c.Until, &ord}
	err := x.sendBatch(ctx, b, 2, func(rows pgx.Rows) error {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if ord < 1 || ord > int64(len(byKey)) || has[ord-1] {
			return fmt.Errorf("the server answered key %d of %d", ord, len(byKey))
		}
		raw := rows.RawValues()
		c.Entry.UserID, c.Entry.Tier = ids.of(raw[0]), tiers.of(raw[2])
		c.Entry.LastRunAt = last.Time
		c.Entry.MissStreak, c.Entry.ErrorStreak, c.Token = int(streak), int(errs), uint64(token)
		byKey[ord-1], has[ord-1] = c, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	got := byKey[:0]
	for i := range byKey {
		if has[i] {
			got = append(got, byKey[i])
		}
	}
	clear(byKey[len(got):])
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
	return x.writeOne(ctx, op, tc.UserID(), false, ifLost, write{sql, append([]any{tc.UserID(), c.Entry.WorkKey, tok}, args...)})
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
	if err := (duework.Done{Tenant: tc, Claim: c, Next: next}).Validate(); err != nil {
		return err
	}
	localstart.From(ctx).Take(c) // the holder ends it: no later StartClaims of it is local
	return x.writeClaimed(ctx, "Index.Complete", tc, c, `
		UPDATE rota_due SET tier = $4, due_at = $5, last_run_at = $6, miss_streak = $7, error_streak = $8,
			claim_token = NULL, claim_until = NULL, claim_started = false
		WHERE user_id = $1 AND work_key = $2 AND claim_token = $3`,
		next.Tier, next.DueAt, ts(next.LastRunAt), next.MissStreak, next.ErrorStreak)
}

// sqlClaimedItems is the start of the batched writes of current claims that lock their
// rows before they write them (Unclaim, which must lock a started claim it leaves
// unwritten), whose items are the arrays $1 users, $2 work keys and $3 tokens, then the
// write's own:
//
//   - e: it locks the rows that still carry the claim of an item, in (UserID, WorkKey)
//     order, waiting for a row another transaction holds and re-checking the claim after
//     the wait (READ COMMITTED);
//   - c (the caller's): it writes each item's entry and ends its claim, returning the
//     item's ordinal, user and new due_at;
//   - f: the users it wrote for, each with the least due_at it gave their entries;
//   - l: then it locks the rows of those users (one probe of the primary key each, after
//     c, which f waits for), in UserID order (the lock is taken on the sorted rows), and
//     names them, their caps and that due_at (sqlLocked) for sqlRecomputeLocked, next in
//     the batch, which recomputes their ReadyAt from a snapshot taken after the locks.
//
// It cannot deadlock: entries are locked in one global order, and users after every entry,
// in UserID order. Items are one per key and claim token (the callers send no key and
// token twice), so no row is written twice.
const sqlClaimedItems = `
WITH k AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]` + "%s" + `)
		WITH ORDINALITY AS k(user_id, work_key, token` + "%s" + `, ord)
), e AS (
	SELECT d.ctid AS tid, d.claim_started AS started, k.* FROM k JOIN rota_due d
		ON d.user_id = k.user_id AND d.work_key = k.work_key AND d.claim_token = k.token
	ORDER BY d.user_id, d.work_key
	FOR UPDATE OF d
), c AS (`

// sqlClaimedUsers ends sqlClaimedItems after c, up to the final SELECT's list, which
// returns each item written (c.ord) and whether it was refused as started.
const sqlClaimedUsers = `), f AS MATERIALIZED (
	SELECT c.user_id, min(c.due_at) AS freed FROM c GROUP BY c.user_id
), l AS (
	SELECT u.user_id, u.max_in_flight, f.freed FROM f JOIN rota_users u ON u.user_id = f.user_id
	ORDER BY u.user_id FOR NO KEY UPDATE OF u
)
SELECT c.ord`

// sqlCompleteMany is CompleteMany's write, one statement for the whole batch: $1 users,
// $2 work keys and $3 tokens as in sqlClaimedItems, $4 tiers, $5 due times, $6 last runs,
// $7 miss streaks, $8 error streaks.
//
//   - k: the items sorted by (UserID, WorkKey), byte by byte as the primary key orders
//     them;
//   - c: one UPDATE joined to k by a nested loop with k outside (hash and merge joins are
//     off, sqlPlanSettings) and the primary key inside, so it writes the rows in k's order:
//     it locks each row as it writes it, waiting for a row another transaction holds and
//     re-checking the claim after the wait (READ COMMITTED), in the one global order that
//     sqlClaimedItems' explicit locks take, with no lock of its own before the write. It
//     writes each item's next entry and ends its claim, started or not, and returns the
//     item's ordinal and user;
//   - l, as in sqlClaimedItems: then the users it wrote for, in UserID order.
//
// It cannot deadlock, for the reasons sqlClaimedItems gives.
var sqlCompleteMany = `
WITH k AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::bigint[], $8::bigint[])
		WITH ORDINALITY AS k(user_id, work_key, token, tier, due_at, last_run_at, miss_streak, error_streak, ord)
	ORDER BY k.user_id COLLATE "C", k.work_key COLLATE "C"
), c AS (
	UPDATE rota_due d SET tier = k.tier, due_at = k.due_at, last_run_at = k.last_run_at,
		miss_streak = k.miss_streak, error_streak = k.error_streak, claim_token = NULL, claim_until = NULL, claim_started = false
	FROM k WHERE d.user_id = k.user_id AND d.work_key = k.work_key AND d.claim_token = k.token
	RETURNING k.ord, d.user_id, d.due_at` + sqlClaimedUsers + `, false FROM c WHERE ` + sqlLocked

// sqlUnclaim is Unclaim's write, one statement for the whole batch (sqlClaimedItems, with
// $4 marking the claims of the caller's set of local starts, written started by their
// Claim but never started): its c ends each item's claim that is not started, or is such
// a local start, and leaves the entry as it is; the items whose claim was started are
// returned as such, unwritten.
var sqlUnclaim = fmt.Sprintf(sqlClaimedItems, ", $4::bool[]", ", mine") + `
	UPDATE rota_due d SET claim_token = NULL, claim_until = NULL, claim_started = false
	FROM e WHERE d.ctid = e.tid AND (NOT e.started OR e.mine)
	RETURNING e.ord, d.user_id, d.due_at` + sqlClaimedUsers + `, false FROM c WHERE ` + sqlLocked + `
UNION ALL
SELECT e.ord, true FROM e WHERE e.started AND NOT e.mine`

// claimItems is a batch of claims to write, as the arrays of sqlClaimedItems: ords[j] is
// the item of the call that row j is, errs each item's outcome so far, and dups maps each
// item that repeats an earlier one (same key and token, and with byUntil Until as well) to
// that earlier item: it is not sent, and settle gives it its outcome.
type claimItems struct {
	op           string
	errs         []error
	ords         []int
	users, works []string
	tokens       []int64
	untils       []time.Time // with byUntil: row j's Until
	byUntil      bool
	byToken      map[int64]int    // the first row sent with each token
	others       map[claimKey]int // rows sent with a token an earlier row of another key or Until has; nil until one is
	dups         map[int]int
}

type claimKey struct {
	key   duework.Key
	token int64
	until time.Time
}

// newClaimItems returns an empty batch of n items; byUntil tells repeats apart by Until
// too (StartClaims, whose items are current only with the claim's own Until).
func newClaimItems(op string, n int, byUntil bool) *claimItems {
	ci := &claimItems{op: op, errs: make([]error, n), byUntil: byUntil, byToken: make(map[int64]int, n),
		ords: make([]int, 0, n), users: make([]string, 0, n), works: make([]string, 0, n), tokens: make([]int64, 0, n)}
	if byUntil {
		ci.untils = make([]time.Time, 0, n)
	}
	return ci
}

// add checks item i's claim (valid is its validation) and, when it may be sent, adds it
// and reports true. An item that repeats an earlier one is kept back for settle.
func (ci *claimItems) add(i int, c duework.Claim, valid error) bool {
	if valid != nil {
		ci.errs[i] = valid
		return false
	}
	tok, err := token(ci.op, c)
	if err != nil {
		ci.errs[i] = err
		return false
	}
	k := claimKey{key: c.Entry.Key(), token: tok}
	if ci.byUntil {
		k.until = c.Until.UTC()
	}
	if j, ok := ci.sent(k); ok {
		if ci.dups == nil {
			ci.dups = map[int]int{}
		}
		ci.dups[i] = ci.ords[j]
		return false
	}
	ci.ords = append(ci.ords, i)
	ci.users = append(ci.users, c.Entry.UserID)
	ci.works = append(ci.works, c.Entry.WorkKey)
	ci.tokens = append(ci.tokens, tok)
	if ci.byUntil {
		ci.untils = append(ci.untils, c.Until)
	}
	return true
}

// sent returns the row already sent with k, or records that the next row is k's and
// reports false. A token names one claim, so rows are looked up by token, and by the
// whole of k only in the rare batch that carries one token with two keys or Untils
// (a forged or foreign claim).
func (ci *claimItems) sent(k claimKey) (int, bool) {
	j, ok := ci.byToken[k.token]
	if !ok {
		ci.byToken[k.token] = len(ci.ords)
		return 0, false
	}
	if ci.keyOf(j) == k {
		return j, true
	}
	if j, ok := ci.others[k]; ok {
		return j, true
	}
	if ci.others == nil {
		ci.others = map[claimKey]int{}
	}
	ci.others[k] = len(ci.ords)
	return 0, false
}

// keyOf is row j's claimKey.
func (ci *claimItems) keyOf(j int) claimKey {
	k := claimKey{key: duework.Key{UserID: ci.users[j], WorkKey: ci.works[j]}, token: ci.tokens[j]}
	if ci.byUntil {
		k.until = ci.untils[j].UTC()
	}
	return k
}

// settle gives each repeated item the outcome it gets applied after the item it repeats:
// duework.ErrClaimStarted when that one's claim was started, before or (with startsClaim,
// when that one's outcome is nil) by it, and duework.ErrClaimLost otherwise, its claim
// being lost or ended by the first.
func (ci *claimItems) settle(startsClaim bool, claimOf func(i int) duework.Claim) []error {
	for i, first := range ci.dups {
		if errors.Is(ci.errs[first], duework.ErrClaimStarted) || startsClaim && ci.errs[first] == nil {
			ci.errs[i] = startedErr(ci.op, claimOf(i))
		} else {
			ci.errs[i] = lost(ci.op, claimOf(i))
		}
	}
	return ci.errs
}

// runClaimItems sends b, whose statement at position query returns, for each item that
// carried its claim, its ordinal (from 1) and whether the claim was started and so refused;
// it gives the refused items ErrClaimStarted and every other sent item it did not return
// ErrClaimLost.
func (x *Index) runClaimItems(ctx context.Context, ci *claimItems, b *pgx.Batch, query int, claimOf func(i int) duework.Claim) ([]error, error) {
	const (
		missing = iota
		done
		refused
	)
	found := make([]int8, len(ci.ords))
	err := x.sendBatch(ctx, b, query, func(rows pgx.Rows) error {
		var j int64
		var started bool
		err := rows.Scan(&j, &started)
		if err == nil {
			if j < 1 || j > int64(len(found)) {
				return fmt.Errorf("the server answered item %d of %d", j, len(found))
			}
			found[j-1] = done // WITH ORDINALITY counts from 1
			if started {
				found[j-1] = refused
			}
		}
		return err
	})
	if err != nil {
		return nil, interpret(ctx, ci.op, err)
	}
	for j, i := range ci.ords {
		switch found[j] {
		case missing:
			ci.errs[i] = lost(ci.op, claimOf(i))
		case refused:
			ci.errs[i] = startedErr(ci.op, claimOf(i))
		}
	}
	return ci.errs, nil
}

func startedErr(op string, c duework.Claim) error {
	return fmt.Errorf("postgres: %s: %w: entry %q token %d", op, duework.ErrClaimStarted, c.Entry.WorkKey, c.Token)
}

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
	local := localstart.From(ctx)
	ci := newClaimItems("Index.CompleteMany", len(done), false)
	var (
		tiers               []string
		streaks, errStreaks []int64
		due                 []time.Time
		last                []*time.Time
	)
	for i, d := range done {
		if !ci.add(i, d.Claim, d.Validate()) {
			continue
		}
		local.Take(d.Claim)
		tiers = append(tiers, d.Next.Tier)
		due = append(due, d.Next.DueAt)
		last = append(last, ts(d.Next.LastRunAt))
		streaks = append(streaks, int64(d.Next.MissStreak))
		errStreaks = append(errStreaks, int64(d.Next.ErrorStreak))
	}
	claimOf := func(i int) duework.Claim { return done[i].Claim }
	if len(ci.ords) == 0 {
		return ci.settle(false, claimOf), nil
	}
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlCompleteMany, ci.users, ci.works, ci.tokens, tiers, due, last, streaks, errStreaks)
	b.Queue(sqlRecomputeLocked)
	if _, err := x.runClaimItems(ctx, ci, b, 1, claimOf); err != nil {
		return nil, err
	}
	return ci.settle(false, claimOf), nil
}

// Unclaim hands claims back unrun, as CompleteMany completes them and in one round trip:
// one statement ends every item's claim that is still current and leaves its entry exactly
// as it is (sqlUnclaim), a second recomputes the users' ReadyAt, so the entries are
// visible at once and the in-flight slots free. The rate mark, LastServed and the stride
// position stay as they are. A claim that was started is not handed back: its item gets
// duework.ErrClaimStarted. A claim of the set of local starts ctx carries (see Claim) that
// no StartClaims under that set took is handed back: it was never started. errs follows
// CompleteMany's rules.
func (x *Index) Unclaim(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	local := localstart.From(ctx)
	ci := newClaimItems("Index.Unclaim", len(claims), false)
	var (
		mine  []bool
		taken []duework.Claim
	)
	for i, c := range claims {
		valid := c.Validate()
		m := false
		if valid == nil {
			m, _ = local.Take(c.Claim)
		}
		if ci.add(i, c.Claim, valid) {
			mine = append(mine, m)
		}
		if m {
			taken = append(taken, c.Claim)
		}
	}
	claimOf := func(i int) duework.Claim { return claims[i].Claim }
	if len(ci.ords) == 0 {
		return ci.settle(false, claimOf), nil
	}
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlUnclaim, ci.users, ci.works, ci.tokens, mine)
	b.Queue(sqlRecomputeLocked)
	if _, err := x.runClaimItems(ctx, ci, b, 1, claimOf); err != nil {
		local.Return(taken) // nothing was written: the batch is one transaction
		return nil, err
	}
	return ci.settle(false, claimOf), nil
}

// checkUntil returns ErrClaimLost for a claim whose Until no claim of this Index has: a
// stored until is a whole microsecond within [duework.MinTime, duework.MaxTime], so any
// other is forged (or another Index's), and pgx would round it onto a stored one.
func checkUntil(op string, c duework.Claim) error {
	if c.Until.IsZero() || !c.Until.Truncate(time.Microsecond).Equal(c.Until) || !vocab.ValidTime(c.Until) {
		return lost(op, c)
	}
	return nil
}

// sqlStartClaims marks started the claims of the items ($1 users, $2 work keys, $3 tokens,
// $4 untils, $5 which are local starts: sqlStartItems) that are their entries' current
// claims, token and until, and not started yet,
// and returns each item it started, and each item it found started already, with whether
// it was:
//
//   - k: the items sorted by (UserID, WorkKey), byte by byte as the primary key orders
//     them;
//   - s: one UPDATE joined to k by a nested loop with k outside and the primary key inside
//     (sqlPlanSettings), so that it writes the rows in that order, locking each as it
//     writes it and re-checking the claim and the mark after waiting for a row another
//     transaction holds (READ COMMITTED): of two calls starting one claim at once, the
//     second finds it started and leaves it. It locks entry rows only, in one global
//     order, with no lock before the write, so it cannot deadlock, and writes each row
//     once;
//   - then, unless s started every item, the items whose claims the statement's snapshot
//     shows current and started: copies of a claim started earlier. The snapshot does not
//     see s's writes, so an item comes back one way or the other, not both. When s
//     started them all, as it does for a batch of fresh claims, the items are not probed
//     a second time.
//
// An item it returns neither way is lost, or was started by a call that committed while
// this one waited for its row: sqlStartedClaims tells which. The untils (never NULL) are
// compared with IS NOT DISTINCT FROM, which, unlike =, does not imply claim_until IS NOT
// NULL, so that the planner cannot take rota_due_claimed_user, a walk of the user's claims,
// for the probe of the primary key. The caller sends each (key, token, until) once.
const sqlStartClaims = `
WITH k AS MATERIALIZED (
	SELECT * FROM ` + sqlStartItems + `
	ORDER BY k.user_id COLLATE "C", k.work_key COLLATE "C"
), s AS (
	UPDATE rota_due d SET claim_started = true FROM k
	WHERE ` + sqlStartCurrent + ` AND (NOT d.claim_started OR k.mine)
	RETURNING k.ord
)
SELECT s.ord, false FROM s
UNION ALL
SELECT k.ord, true FROM k JOIN rota_due d ON ` + sqlStartCurrent + ` AND d.claim_started AND NOT k.mine
WHERE (SELECT count(*) FROM s) < (SELECT count(*) FROM k)`

// sqlStartedClaims returns, of the items of sqlStartClaims' arguments, those whose claim is
// their entry's current claim and started. Read after sqlStartClaims committed, for the
// items it returned neither way, it tells those a concurrent call started (refused as
// started) from those lost.
const sqlStartedClaims = `
SELECT k.ord, true FROM ` + sqlStartItems + `
JOIN rota_due d ON ` + sqlStartCurrent + ` AND d.claim_started AND NOT k.mine`

// sqlStartItems and sqlStartCurrent are the items of sqlStartClaims' arguments, and the
// condition that the entry row d holds item k's claim, token and until. k.mine ($5) marks
// a claim of the caller's set of local starts, written started by its Claim but not
// started: sqlStartClaims starts it if it is current, whatever its mark, and neither
// statement finds it started.
const (
	sqlStartItems   = `unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::bool[]) WITH ORDINALITY AS k(user_id, work_key, token, until, mine, ord)`
	sqlStartCurrent = `d.user_id = k.user_id AND d.work_key = k.work_key AND d.claim_token = k.token
	AND d.claim_until IS NOT DISTINCT FROM k.until`
)

// StartClaims marks started each claim that is its entry's current claim, token and Until
// as Claim returned them, and not started yet, in one round trip and one statement
// (sqlStartClaims), which also finds the copies of claims started earlier; one more round
// trip, only for claims it found neither way, tells those a concurrent call started from
// those lost (sqlStartedClaims). errs[i] is item i's outcome: nil when this call started the claim,
// duework.ErrClaimStarted when it was started already (as for the second of one claim
// given twice), duework.ErrClaimLost when it is not current, or the validation error of
// an item refused before anything was sent. When err is not nil, any subset may have been
// marked, as the contract says: the marks are written by the first round trip alone.
//
// A claim of the set of local starts ctx carries (see Claim) is started once, by the
// first StartClaims under that set, with no round trip while the set's clock reads a time
// before its Until: no other process can have claimed its entry meanwhile, nor started
// it. After its Until it is started by the statement, if it is still current. Without
// the set, such a claim is found started.
func (x *Index) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	const op = "Index.StartClaims"
	local := localstart.From(ctx)
	// Each item's claim is first checked and, when it is one of local's, taken from it;
	// the rest are sent: a call whose claims are all live local starts (a Runner's) sends
	// nothing and builds no batch.
	const (
		sent = iota
		mine // taken from local, not live: sent, and started if it is current
		live // taken from local while it lasts: started here, errs[i] nil
	)
	kinds := make([]uint8, len(claims))
	valid := make([]error, len(claims))
	toSend, taken := 0, 0
	for i, c := range claims {
		if valid[i] = c.Validate(); valid[i] == nil {
			valid[i] = checkUntil(op, c.Claim)
		}
		if valid[i] == nil {
			switch m, l := local.Take(c.Claim); {
			case l:
				kinds[i] = live
			case m:
				kinds[i] = mine
			}
		}
		if kinds[i] != sent {
			taken++
		}
		if kinds[i] != live {
			toSend++
		}
	}
	if toSend == 0 {
		return make([]error, len(claims)), nil
	}
	ci := newClaimItems(op, len(claims), true)
	claimOf := func(i int) duework.Claim { return claims[i].Claim }
	var mineSent []bool
	for i, c := range claims {
		if kinds[i] != live && ci.add(i, c.Claim, valid[i]) {
			mineSent = append(mineSent, kinds[i] == mine)
		}
	}
	if len(ci.ords) > 0 {
		b := &pgx.Batch{}
		b.Queue(sqlPlanSettings)
		b.Queue(sqlStartClaims, ci.users, ci.works, ci.tokens, ci.untils, mineSent)
		if _, err := x.runClaimItems(ctx, ci, b, 1, claimOf); err != nil {
			back := make([]duework.Claim, 0, taken)
			for i, c := range claims {
				if kinds[i] != sent {
					back = append(back, c.Claim)
				}
			}
			local.Return(back) // the call reports none of them started
			return nil, err
		}
		if err := x.refuseStarted(ctx, ci, mineSent, claimOf); err != nil {
			return nil, err
		}
	}
	return ci.settle(true, claimOf), nil
}

// refuseStarted reads the claims of ci's sent items that sqlStartClaims returned neither
// started nor found started (those it left ErrClaimLost) with sqlStartedClaims, in one
// more round trip, and gives those it finds current and started ErrClaimStarted. It reads
// nothing when there are none.
func (x *Index) refuseStarted(ctx context.Context, ci *claimItems, mine []bool, claimOf func(i int) duework.Claim) error {
	rest := &claimItems{op: ci.op} // the items left lost, in ci's order; rest.ords maps them back to the call's items
	var restMine []bool
	for j, i := range ci.ords {
		if errors.Is(ci.errs[i], duework.ErrClaimLost) {
			rest.ords = append(rest.ords, i)
			rest.users, rest.works, rest.tokens = append(rest.users, ci.users[j]), append(rest.works, ci.works[j]), append(rest.tokens, ci.tokens[j])
			rest.untils, restMine = append(rest.untils, ci.untils[j]), append(restMine, mine[j])
		}
	}
	if len(rest.ords) == 0 {
		return nil
	}
	// runClaimItems indexes errs by the call's items, as rest.ords names them.
	rest.errs = ci.errs
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlStartedClaims, rest.users, rest.works, rest.tokens, rest.untils, restMine)
	_, err := x.runClaimItems(ctx, rest, b, 1, claimOf)
	return err
}

// UnscheduleClaimed removes tc's entry c.Entry.WorkKey while c is its current claim, and
// otherwise returns duework.ErrClaimLost and removes nothing.
func (x *Index) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if err := (duework.Unclaim{Tenant: tc, Claim: c}).Validate(); err != nil {
		return err
	}
	localstart.From(ctx).Take(c)
	return x.writeClaimed(ctx, "Index.UnscheduleClaimed", tc, c,
		`DELETE FROM rota_due WHERE user_id = $1 AND work_key = $2 AND claim_token = $3`)
}
