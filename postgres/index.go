package postgres

import (
	"context"
	"fmt"
	"slices"
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

// SQL that keeps rota_users.next_at exact. Every transaction that changes a user's entries
// locks the user's row after its entry writes (users in UserID order, so that concurrent
// claims cannot deadlock) and only then recomputes next_at in a new statement: under READ
// COMMITTED the new statement's snapshot sees every change committed before the lock was
// granted, and any writer still in flight recomputes again after it, so the last
// recomputation of a user always sees all of its entries.
const (
	sqlEnsureUser = `INSERT INTO rota_users (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`
	sqlLockUsers  = `SELECT user_id FROM rota_users WHERE user_id = ANY($1::text[]) ORDER BY user_id FOR NO KEY UPDATE`
	sqlFreeAt     = `(SELECT min(d.due_at) FROM rota_due d WHERE d.user_id = u.user_id AND d.claim_until IS NULL)`
	sqlClaimedAt  = `(SELECT min(d.claim_until) FROM rota_due d WHERE d.user_id = u.user_id AND d.claim_until IS NOT NULL)`
	sqlRecompute  = `UPDATE rota_users u SET free_at = n.free_at, claimed_at = n.claimed_at
		FROM (SELECT u.user_id, ` + sqlFreeAt + ` AS free_at, ` + sqlClaimedAt + ` AS claimed_at
		      FROM rota_users u WHERE u.user_id = ANY($1::text[])) n
		WHERE u.user_id = n.user_id
		  AND (u.free_at IS DISTINCT FROM n.free_at OR u.claimed_at IS DISTINCT FROM n.claimed_at)`
	sqlServe = `UPDATE rota_users u SET last_served = $2, free_at = ` + sqlFreeAt + `, claimed_at = ` + sqlClaimedAt + `
		WHERE u.user_id = ANY($1::text[])`
)

// writeOne runs one entry write of tc's user and keeps the user's summary row exact, in one
// transaction and one round trip. check inspects the entry write's result and may veto the
// transaction by returning an error.
func (x *Index) writeOne(ctx context.Context, op, user string, ensure bool, check func(rowsAffected int64) error, sql string, args ...any) error {
	err := pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(sql, args...)
		if ensure {
			b.Queue(sqlEnsureUser, user)
		}
		b.Queue(sqlLockUsers, []string{user})
		b.Queue(sqlRecompute, []string{user})
		br := tx.SendBatch(ctx, b)
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if check != nil {
			if err := check(tag.RowsAffected()); err != nil {
				br.Close()
				return err
			}
		}
		return br.Close()
	})
	return interpret(ctx, op, err)
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
	if err == pgx.ErrNoRows {
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

// sqlDueHeads finds the users with visible due work through rota_users.next_at (one range
// of a small index: the users whose earliest visible instant has passed) and reads each one's
// first perUser+1 entries with a LATERAL join over two index ranges — its unclaimed due rows
// in (due_at, work_key) order and its rows whose claims have ended. Its cost grows with the
// number of users with due work times perUser, never with a backlog. Each branch is guarded by
// the user's summary (free_at, claimed_at), so a user without ended claims costs one index
// probe, not two.
const sqlDueHeads = `
SELECT u.user_id, u.last_served, h.work_key, h.tier, h.due_at, h.last_run_at, h.miss_streak
FROM rota_users u
CROSS JOIN LATERAL (
	SELECT x.* FROM (
		(SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak FROM rota_due d
		 WHERE u.free_at <= $1 AND d.user_id = u.user_id AND d.claim_until IS NULL AND d.due_at <= $1
		 ORDER BY d.due_at, d.work_key LIMIT $2)
		UNION ALL
		(SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak FROM rota_due d
		 WHERE u.claimed_at <= $1 AND d.user_id = u.user_id AND d.claim_until <= $1 AND d.due_at <= $1
		 ORDER BY d.due_at, d.work_key LIMIT $2)
	) x ORDER BY x.due_at, x.work_key LIMIT $2
) h
WHERE u.next_at <= $1
ORDER BY u.user_id, h.due_at, h.work_key`

// DueHeads returns, in UserID order, one Head per user with unclaimed entries due at now:
// its first perUser of them in (DueAt, WorkKey) order, More when it has further ones, and
// LastServed. One query; see sqlDueHeads for its plan and cost.
func (x *Index) DueHeads(ctx context.Context, now time.Time, perUser int) ([]duework.Head, error) {
	if perUser < 1 {
		return nil, fmt.Errorf("%w: perUser must be ≥ 1, got %d", duework.ErrInvalid, perUser)
	}
	var heads []duework.Head
	err := pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		heads = heads[:0]
		// The plan is a few thousand index probes, which JIT compilation (on by default
		// above a plan cost this query reaches with ~5,000 users) slows by 10–20 ms.
		if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlDueHeads, now, perUser+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e      duework.Entry
				served *time.Time
				last   *time.Time
				streak int64
			)
			if err := rows.Scan(&e.UserID, &served, &e.WorkKey, &e.Tier, &e.DueAt, &last, &streak); err != nil {
				return err
			}
			e.LastRunAt = fromTS(last)
			e.MissStreak = int(streak)
			if n := len(heads); n == 0 || heads[n-1].UserID != e.UserID {
				heads = append(heads, duework.Head{UserID: e.UserID, LastServed: fromTS(served)})
			}
			h := &heads[len(heads)-1]
			if len(h.Due) == perUser {
				h.More = true
				continue
			}
			h.Due = append(h.Due, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, interpret(ctx, "Index.DueHeads", err)
	}
	return heads, nil
}

// sqlClaim locks, among the given keys, the rows that are due at now and unclaimed or whose
// claim has ended — skipping rows another transaction holds, so that concurrent dispatchers
// never wait for each other nor claim one entry twice — and gives each a new token from the
// rota_claim_token sequence. Rows whose claim was committed meanwhile are re-checked by the
// lock (READ COMMITTED) and dropped.
const sqlClaim = `
UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $4
FROM (
	SELECT d.user_id, d.work_key, k.ord
	FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(user_id, work_key, ord)
	JOIN rota_due d ON d.user_id = k.user_id AND d.work_key = k.work_key
	WHERE d.due_at <= $3 AND (d.claim_until IS NULL OR d.claim_until <= $3)
	FOR UPDATE OF d SKIP LOCKED
) c
WHERE d.user_id = c.user_id AND d.work_key = c.work_key
RETURNING c.ord, ` + entryColumns + `, d.claim_token, d.claim_until`

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
	var got []claimAt
	err := pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		got = got[:0]
		rows, err := tx.Query(ctx, sqlClaim, users, works, now, until)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimAt, error) {
			var ca claimAt
			var token int64
			e, err := scanEntryAfter(r, &ca.ord, &token, &ca.c.Until)
			ca.c.Entry, ca.c.Token = e, uint64(token)
			return ca, err
		})
		if err != nil || len(got) == 0 {
			return err
		}
		served := make([]string, 0, len(got))
		for _, ca := range got {
			served = append(served, ca.c.Entry.UserID)
		}
		slices.Sort(served)
		served = slices.Compact(served)
		b := &pgx.Batch{}
		b.Queue(sqlLockUsers, served)
		b.Queue(sqlServe, served, now)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Claim", err)
	}
	slices.SortFunc(got, func(a, b claimAt) int { return int(a.ord - b.ord) })
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
			return fmt.Errorf("%w: entry %q token %d", duework.ErrClaimLost, c.Entry.WorkKey, c.Token)
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
