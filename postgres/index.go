package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// Index is a duework.Index on PostgreSQL, for dispatchers and workers on several machines
// sharing one database. Make one with NewIndex after Migrate. It is safe for concurrent use.
//
// See the package documentation for the tables, the cost of each call and the precision of
// stored times.
type Index struct {
	pool *pgxpool.Pool
}

var _ duework.Index = (*Index)(nil)

// NewIndex returns the Index stored in the pool's schema, which Migrate must have prepared.
func NewIndex(pool *pgxpool.Pool) *Index {
	if pool == nil {
		panic("postgres: NewIndex: nil pool")
	}
	return &Index{pool: pool}
}

// ts converts a time for storage: the zero time is NULL.
func ts(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// fromTS converts a stored time back: NULL is the zero time.
func fromTS(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// Per-user reads of rota_due are written as keyset ranges, so that their plans do not
// depend on the table's statistics.
//
// Written plainly — WHERE d.user_id = $1 … ORDER BY d.due_at, d.work_key (or min(d.due_at))
// — the equality makes user_id a constant to the planner, so both partial indexes over
// unclaimed rows deliver the wanted order: rota_due_free_user (user_id, due_at, work_key),
// which reads the user's rows only, and rota_due_free (due_at, user_id, work_key), which
// walks every due row of every user and checks user_id on each. Which one wins is a cost
// estimate built on the statistics of user_id. When they are stale — ANALYZE ran while one
// tenant's bulk-loaded backlog was the whole table, then other users were scheduled, and
// autovacuum will not analyze again until a tenth of the rows change — the planner believes
// every row is that tenant's, picks rota_due_free, and each quiet user's read walks the
// whole backlog: with 200,000 rows, 3.6 ms per user, 370 ms for a DueHeads of 100 users,
// and 3.5 ms for every Schedule, Complete and Unschedule once the prepared statement went
// generic.
//
// A row comparison is not an equality, so user_id is no constant: only an index that
// leads with (user_id, due_at) serves the range (user_id, due_at) BETWEEN (u, -infinity)
// AND (u, now) as a bounded scan, and only rota_due_free_user yields the order
// (user_id, due_at, work_key) without a sort. Every other plan reads all of the range and
// sorts it, which costs more under any statistics, and the range's own estimate does not
// read them (its bounds are parameters). The plan-shape test loads the stale case and
// checks both the custom and the generic plan.

// The user summary (rota_users.free_at) and LastServed.
//
// free_at must never be later than the earliest due_at of the user's unclaimed entries, or
// DueHeads would miss the user. Claim only removes rows from that set, so it leaves free_at
// alone (a lower bound stays a lower bound; DueHeads skips a user whose due rows are all
// claimed). Schedule, Complete and Unschedule recompute it exactly: each locks the user's row
// after its entry write and only then recomputes, in a new statement. Under READ COMMITTED
// that statement's snapshot sees every change committed before the lock was granted, and a
// writer still in flight recomputes again after it, so the last recomputation of a user
// always sees all of its entries. Entry rows are always locked before user rows, and
// several user rows in UserID order, so these transactions cannot deadlock.
const (
	sqlEnsureUser = `INSERT INTO rota_users (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`
	sqlLockUser   = `SELECT 1 FROM rota_users WHERE user_id = $1 FOR NO KEY UPDATE`
	// sqlRecompute reads the user's first unclaimed row as a keyset range of
	// rota_due_free_user, never as min(due_at): see "Per-user reads" above. OFFSET 0 keeps
	// the subquery from being pulled up, which would read the row twice (SET and WHERE).
	sqlRecompute = `UPDATE rota_users u SET free_at = n.free_at
		FROM (SELECT (SELECT d.due_at FROM rota_due d
			WHERE (d.user_id, d.due_at) BETWEEN ($1, '-infinity') AND ($1, 'infinity') AND d.claim_until IS NULL
			ORDER BY d.user_id, d.due_at LIMIT 1) AS free_at OFFSET 0) n
		WHERE u.user_id = $1 AND u.free_at IS DISTINCT FROM n.free_at`
)

// writeOne runs one entry write of a user and keeps the user's summary exact, atomically
// and in one round trip: the statements go as one pgx batch, which the server runs as one
// implicit transaction, each statement with its own snapshot. result, when not nil, turns
// the entry write's row count into the call's error; the summary is recomputed either way
// (recomputing an unchanged user changes nothing).
func (x *Index) writeOne(ctx context.Context, op, user string, ensure bool, result func(rowsAffected int64) error, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	if ensure {
		b.Queue(sqlEnsureUser, user)
	}
	b.Queue(sqlLockUser, user)
	b.Queue(sqlRecompute, user)
	br := x.pool.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return interpret(ctx, op, err)
	}
	if result != nil {
		return result(tag.RowsAffected())
	}
	return nil
}

// Schedule inserts or replaces tc's entry e.WorkKey. Replacing a claimed entry ends the
// claim: the claimant's Complete then gets duework.ErrClaimLost.
func (x *Index) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	return x.writeOne(ctx, "Index.Schedule", e.UserID, true, nil, `
		INSERT INTO rota_due (user_id, work_key, tier, due_at, last_run_at, miss_streak)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (user_id, work_key) DO UPDATE SET
			tier = EXCLUDED.tier, due_at = EXCLUDED.due_at, last_run_at = EXCLUDED.last_run_at,
			miss_streak = EXCLUDED.miss_streak, claim_token = NULL, claim_until = NULL`,
		e.UserID, e.WorkKey, e.Tier, e.DueAt, ts(e.LastRunAt), e.MissStreak)
}

// Unschedule removes tc's entry workKey whatever its claim; an absent entry is not an error.
func (x *Index) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := duework.ValidateWorkKey(workKey); err != nil {
		return err
	}
	return x.writeOne(ctx, "Index.Unschedule", tc.UserID(), false, nil,
		`DELETE FROM rota_due WHERE user_id = $1 AND work_key = $2`, tc.UserID(), workKey)
}

const entryColumns = `d.user_id, d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak`

// scanEntry reads entryColumns.
func scanEntry(row pgx.Row, extra ...any) (duework.Entry, error) {
	var e duework.Entry
	var last *time.Time
	var streak int64
	err := row.Scan(append([]any{&e.UserID, &e.WorkKey, &e.Tier, &e.DueAt, &last, &streak}, extra...)...)
	e.LastRunAt = fromTS(last)
	e.MissStreak = int(streak)
	return e, err
}

// Get returns tc's entry workKey, claimed or not, or duework.ErrNotFound.
func (x *Index) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	if err := tc.Check(); err != nil {
		return duework.Entry{}, err
	}
	if err := duework.ValidateWorkKey(workKey); err != nil {
		return duework.Entry{}, err
	}
	e, err := scanEntry(x.pool.QueryRow(ctx,
		`SELECT `+entryColumns+` FROM rota_due d WHERE d.user_id = $1 AND d.work_key = $2`, tc.UserID(), workKey))
	if errors.Is(err, pgx.ErrNoRows) {
		return duework.Entry{}, fmt.Errorf("postgres: Index.Get %q: %w", workKey, duework.ErrNotFound)
	}
	if err != nil {
		return duework.Entry{}, interpret(ctx, "Index.Get", err)
	}
	return e, nil
}

// DueBefore returns at most limit unclaimed entries with DueAt <= now, ordered by (DueAt,
// UserID, WorkKey). It reads the limit first unclaimed rows of the due index and the rows
// whose claims ended, so its cost grows with limit and with the number of claims held, not
// with the backlog.
func (x *Index) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit must be ≥ 1, got %d", duework.ErrInvalid, limit)
	}
	rows, err := x.pool.Query(ctx, `
		SELECT `+entryColumns+` FROM (
			(SELECT * FROM rota_due d WHERE d.claim_until IS NULL AND d.due_at <= $1
			 ORDER BY d.due_at, d.user_id, d.work_key LIMIT $2)
			UNION ALL
			(SELECT * FROM rota_due d WHERE d.claim_until <= $1 AND d.due_at <= $1
			 ORDER BY d.due_at, d.user_id, d.work_key LIMIT $2)
		) d ORDER BY d.due_at, d.user_id, d.work_key LIMIT $2`, now, limit)
	if err != nil {
		return nil, interpret(ctx, "Index.DueBefore", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (duework.Entry, error) { return scanEntry(r) })
	if err != nil {
		return nil, interpret(ctx, "Index.DueBefore", err)
	}
	return out, nil
}

// sqlDueHeads reads the users with visible due work and each one's first $2 (perUser+1)
// visible entries, in two parts that DueHeads merges:
//
//   - the users whose free_at has passed (one range of a small index), each with a LATERAL
//     read of its unclaimed due rows in (due_at, work_key) order: the first $2 entries of
//     rota_due_free_user, however deep the backlog;
//   - the rows whose claim has ended (one range of rota_due_claimed), at most $2 per user:
//     there are as many as claims were abandoned.
//
// Its cost grows with the number of users with due work times perUser and with the number of
// abandoned claims, never with a backlog. The rows come unsorted.
//
// The per-user read is written as a keyset range of (user_id, due_at), ordered by user_id
// first, and not as d.user_id = u.user_id ordered by (due_at, work_key): see "Per-user reads" above.
const sqlDueHeads = `
(SELECT false AS ended, u.user_id, u.last_served, h.work_key, h.tier, h.due_at, h.last_run_at, h.miss_streak
 FROM rota_users u CROSS JOIN LATERAL (
	SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak FROM rota_due d
	WHERE (d.user_id, d.due_at) BETWEEN (u.user_id, '-infinity') AND (u.user_id, $1) AND d.claim_until IS NULL
	ORDER BY d.user_id, d.due_at, d.work_key LIMIT $2) h
 WHERE u.free_at <= $1)
UNION ALL
(SELECT true, u.user_id, u.last_served, h.work_key, h.tier, h.due_at, h.last_run_at, h.miss_streak
 FROM (SELECT d.*, row_number() OVER (PARTITION BY d.user_id ORDER BY d.due_at, d.work_key) AS n
       FROM rota_due d WHERE d.claim_until <= $1 AND d.due_at <= $1) h
 JOIN rota_users u ON u.user_id = h.user_id
 WHERE h.n <= $2)`

// DueHeads returns, in UserID order, one Head per user with unclaimed entries due at now:
// its first perUser of them in (DueAt, WorkKey) order, More when it has further ones, and
// LastServed. One query (see sqlDueHeads for its plan), run with JIT off; the two parts it
// returns for a user are merged here.
func (x *Index) DueHeads(ctx context.Context, now time.Time, perUser int) ([]duework.Head, error) {
	if perUser < 1 {
		return nil, fmt.Errorf("%w: perUser must be ≥ 1, got %d", duework.ErrInvalid, perUser)
	}
	type part struct {
		head  duework.Head
		ended []duework.Entry // rows whose claim ended, merged into head.Due below
	}
	parts := map[string]*part{}
	// The plan is thousands of small index probes, which JIT compilation (on by default
	// above a plan cost this query reaches with a few thousand users) slows down by 10–20
	// ms; the batch is one implicit transaction, so the setting ends with it.
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('jit', 'off', true)`)
	b.Queue(sqlDueHeads, now, perUser+1)
	br := x.pool.SendBatch(ctx, b)
	err := func() error {
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				ended  bool
				e      duework.Entry
				served *time.Time
				last   *time.Time
				streak int64
			)
			if err := rows.Scan(&ended, &e.UserID, &served, &e.WorkKey, &e.Tier, &e.DueAt, &last, &streak); err != nil {
				return err
			}
			e.LastRunAt = fromTS(last)
			e.MissStreak = int(streak)
			p := parts[e.UserID]
			if p == nil {
				p = &part{head: duework.Head{UserID: e.UserID, LastServed: fromTS(served)}}
				parts[e.UserID] = p
			}
			if ended {
				p.ended = append(p.ended, e)
			} else {
				p.head.Due = append(p.head.Due, e)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return nil, interpret(ctx, "Index.DueHeads", err)
	}
	order := make([]*part, 0, len(parts))
	for _, p := range parts {
		order = append(order, p)
	}
	slices.SortFunc(order, func(a, b *part) int { return strings.Compare(a.head.UserID, b.head.UserID) })
	heads := make([]duework.Head, 0, len(order))
	for _, p := range order {
		h := p.head
		if len(p.ended) > 0 {
			h.Due = append(h.Due, p.ended...)
			slices.SortFunc(h.Due, compareDue)
		}
		if len(h.Due) > perUser {
			h.Due, h.More = h.Due[:perUser:perUser], true
		}
		heads = append(heads, h)
	}
	return heads, nil
}

// compareDue orders one user's entries by (DueAt, WorkKey).
func compareDue(a, b duework.Entry) int {
	if c := a.DueAt.Compare(b.DueAt); c != 0 {
		return c
	}
	return strings.Compare(a.WorkKey, b.WorkKey)
}

// sqlClaim is the whole of Claim, one statement and so one atomic step:
//
//   - it locks, among the given keys, the rows that are due at now and unclaimed or whose
//     claim has ended, skipping rows another transaction holds — so concurrent dispatchers
//     never wait for each other nor claim one entry twice; a row whose claim another
//     transaction committed meanwhile is re-checked by the lock (READ COMMITTED) and dropped;
//   - gives each a new token from the rota_claim_token sequence and its until;
//   - stamps last_served on the users it claimed for, locking their rows in UserID order so
//     that concurrent claims cannot deadlock (a HOT update: no indexed column changes).
//
// free_at is left alone: a claim can only raise the user's earliest unclaimed due_at.
const sqlClaim = `
WITH c AS (
	UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $4
	FROM (
		SELECT k.ord, x.tid
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(user_id, work_key, ord)
		CROSS JOIN LATERAL (
			SELECT d.ctid AS tid FROM rota_due d
			WHERE d.user_id = k.user_id AND d.work_key = k.work_key
			  AND d.due_at <= $3 AND (d.claim_until IS NULL OR d.claim_until <= $3)
			FOR UPDATE SKIP LOCKED
		) x
	) k
	WHERE d.ctid = k.tid
	RETURNING k.ord, ` + entryColumns + `, d.claim_token, d.claim_until
), l AS (
	SELECT u.user_id FROM rota_users u WHERE u.user_id IN (SELECT c.user_id FROM c)
	ORDER BY u.user_id FOR NO KEY UPDATE
), s AS (
	UPDATE rota_users u SET last_served = $3 FROM l WHERE u.user_id = l.user_id
)
SELECT * FROM c`

// Claim claims, atomically, those of keys that are due at now and unclaimed, until until,
// and returns their claims in the order of keys; it stamps LastServed = now for every user it
// claimed an entry of. Keys that are absent, not due, claimed or locked by a concurrent
// writer are skipped. A key given twice is claimed once.
//
// Stored times have microsecond precision: until is rounded up to the next microsecond, so a
// claim never ends before the until it was given.
func (x *Index) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if !until.After(now) {
		return nil, fmt.Errorf("%w: until %v is not after now %v", duework.ErrInvalid, until, now)
	}
	if len(keys) == 0 {
		return nil, ctx.Err()
	}
	until = ceilMicro(until)
	users := make([]string, 0, len(keys))
	works := make([]string, 0, len(keys))
	seen := make(map[duework.Key]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		users = append(users, k.UserID)
		works = append(works, k.WorkKey)
	}
	type claimAt struct {
		ord int64
		c   duework.Claim
	}
	rows, err := x.pool.Query(ctx, sqlClaim, users, works, now, until)
	if err != nil {
		return nil, interpret(ctx, "Index.Claim", err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimAt, error) {
		var ca claimAt
		var token int64
		e, err := scanEntryAfter(r, &ca.ord, &token, &ca.c.Until)
		ca.c.Entry, ca.c.Token = e, uint64(token)
		return ca, err
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Claim", err)
	}
	slices.SortFunc(got, func(a, b claimAt) int { return cmp.Compare(a.ord, b.ord) })
	out := make([]duework.Claim, len(got))
	for i, ca := range got {
		out[i] = ca.c
	}
	return out, nil
}

// scanEntryAfter reads leading columns into lead, then entryColumns, then rest.
func scanEntryAfter(row pgx.Row, lead any, rest ...any) (duework.Entry, error) {
	var e duework.Entry
	var last *time.Time
	var streak int64
	err := row.Scan(append([]any{lead, &e.UserID, &e.WorkKey, &e.Tier, &e.DueAt, &last, &streak}, rest...)...)
	e.LastRunAt = fromTS(last)
	e.MissStreak = int(streak)
	return e, err
}

// ceilMicro rounds t up to a whole microsecond, the server's precision.
func ceilMicro(t time.Time) time.Time {
	if r := t.Sub(t.Truncate(time.Microsecond)); r > 0 {
		return t.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return t
}

// Complete replaces the claimed entry with next and ends the claim, or returns
// duework.ErrClaimLost and writes nothing when c is no longer the entry's current claim (a
// later claim replaced it, or the host rescheduled or unscheduled the entry). It succeeds
// past c.Until as long as no later claim was made.
func (x *Index) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	if err := next.Validate(tc); err != nil {
		return err
	}
	if c.Entry.UserID != tc.UserID() {
		return fmt.Errorf("%w: claim's UserID %q is not the context's user %q", duework.ErrInvalid, c.Entry.UserID, tc.UserID())
	}
	if next.WorkKey != c.Entry.WorkKey {
		return fmt.Errorf("%w: next WorkKey %q is not the claim's %q", duework.ErrInvalid, next.WorkKey, c.Entry.WorkKey)
	}
	if c.Token == 0 || c.Token > 1<<63-1 {
		return fmt.Errorf("postgres: Index.Complete: %w: entry %q token %d", duework.ErrClaimLost, c.Entry.WorkKey, c.Token)
	}
	lost := func(n int64) error {
		if n == 0 {
			return fmt.Errorf("postgres: Index.Complete: %w: entry %q token %d", duework.ErrClaimLost, c.Entry.WorkKey, c.Token)
		}
		return nil
	}
	err := x.writeOne(ctx, "Index.Complete", tc.UserID(), false, lost, `
		UPDATE rota_due SET tier = $4, due_at = $5, last_run_at = $6, miss_streak = $7,
			claim_token = NULL, claim_until = NULL
		WHERE user_id = $1 AND work_key = $2 AND claim_token = $3`,
		tc.UserID(), next.WorkKey, int64(c.Token), next.Tier, next.DueAt, ts(next.LastRunAt), next.MissStreak)
	return err
}
