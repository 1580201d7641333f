package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Index is a duework.Index on PostgreSQL, for dispatchers and workers on several machines
// sharing one database. Make one with NewIndex after Migrate. It is safe for concurrent use.
// ListenDue wakes a host's Runner when an entry is scheduled due now on any replica.
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

// ceilMicro rounds t up to a whole microsecond, the server's precision.
func ceilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

// validKey reports whether k could name a stored entry: keys that fail it are skipped, as
// the server could not even compare them (a NUL byte).
func validKey(k duework.Key) bool {
	return vocab.ValidName(k.UserID) && vocab.ValidName(k.WorkKey)
}

// validUsers returns the distinct user IDs of ids that could be stored, sorted bytewise.
func validUsers(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if tenancy.ValidateID("UserID", id) == nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
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
// whole backlog.
//
// A row comparison is not an equality, so user_id is no constant: only an index that
// leads with (user_id, due_at) serves the range (user_id, due_at) BETWEEN (u, -infinity)
// AND (u, now) as a bounded scan, and only rota_due_free_user yields the order
// (user_id, due_at, work_key) without a sort. Every other plan reads all of the range and
// sorts it, which costs more under any statistics, and the range's own estimate does not
// read them (its bounds are parameters). The ReadyAt probe of claimed rows is written the
// same way over rota_due_claimed_user, (user_id, greatest(due_at, claim_until)); Ready's
// read of the claims that ended may use an equality, since no other index holds claimed
// rows by user. The plan-shape test loads stale and fresh statistics and checks both the
// custom and the generic plan of every such read.

// ReadyAt and locks.
//
// Every user's row of rota_users keeps what its Turn is made of, exact at every commit:
// free_at, the least due_at of its unclaimed entries; claim_end_at, the least
// greatest(due_at, claim_until) of its claimed ones; slot_at, the max_in_flight-th latest
// end among its claims (see slotAt); each NULL when there is none; and turn (turnOf), NULL
// without entries. Every write to a user's entries therefore locks the user's row after
// its entry writes and only then sets them, in a new statement (sqlRecompute;
// sqlRecomputeLocked after CompleteMany and Unclaim, sqlServe after Claim). Under READ
// COMMITTED that statement's snapshot sees every change committed before the lock was
// granted, and a writer still in flight sets them again after it, so the last write of a
// user always sees all of its entries. It also means that, under the lock, the stored
// values are exact for everything but the locking transaction's own changes: sqlServe
// relies on that to keep claim_end_at without a probe. The rate mark and the stride
// position change only in sqlServe, and the pause only in sqlPause, sqlResume and sqlServe,
// under the same lock.
//
// Lock order, which makes every statement deadlock-free: user rows are locked in UserID
// order, and no transaction waits for an entry row while it holds a user row for longer
// than a millisecond. Writers lock their entry rows first (several in (UserID, WorkKey)
// order) and their users after them; Claim locks its users first when one of them has a
// limit, so that it decides on their limits under the lock, and then waits for an entry
// row at most lockedWait (lock_timeout), after which it takes entry rows only with SKIP
// LOCKED, which never waits; when none of its users has a limit it is such a writer: it
// writes its entry rows in (UserID, WorkKey) order and locks its users after them (see
// sqlClaimLock). So a transaction that holds a user waits only for a user that sorts after
// it or, that millisecond, for an entry, and no cycle of waits outlasts it. Ready
// never waits at all (SKIP LOCKED on users, no entry locks). Pause and Resume lock one user
// row and no entry; StartClaims locks entry rows only, in (UserID, WorkKey) order.

// sqlPlanSettings pins the plans of the statements that follow it in a batch (the batch's
// implicit transaction ends the settings) to what every one of them is: a handful of index
// probes per user or key, each a nested loop over a table's index. The statements never
// join two tables' worth of rows, nor a CTE with a CTE, so nothing else is needed:
//
//   - with sequential scans, bitmap scans, hash and merge joins off, statistics that think
//     rota_users holds one page (a bulk load analyzed early) cannot turn a lookup by key
//     into a scan of every user;
//   - with incremental sorts off, statistics that think a user holds a hundred entries (the
//     average) cannot turn the read of a user's first entries into a walk of the primary
//     key over its whole backlog, sorted a user at a time;
//   - JIT compilation, on by default above a plan cost these statements reach with a few
//     thousand rows, only slows such plans down;
//   - each statement's plan is the same for any arguments (the plan-shape test checks the
//     generic plan of every one), so the generic plan is forced, made once per connection
//     and statement, instead of a plan made again at every call.
const sqlPlanSettings = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
	set_config('enable_incremental_sort', 'off', true), set_config('jit', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true)`

// sqlHoldSettings is sqlPlanSettings for the calls that write only holds, routes and limits
// (Ready, Release, Route): their commit does not wait for the write-ahead log to reach the
// disk (synchronous_commit off, for their transaction only). A server crash can lose the
// last such writes, which only lets a hold end early or leaves a user with its previous
// group and limits, to be routed again; claims, completions and entries are always written
// durably. It saves a disk flush on every dispatch cycle.
const sqlHoldSettings = sqlPlanSettings + `, set_config('synchronous_commit', 'off', true)`

const (
	sqlEnsureUser = `INSERT INTO rota_users (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`
	sqlLockUser   = `SELECT 1 FROM rota_users WHERE user_id = $1 FOR NO KEY UPDATE`
	// sqlLockUsers locks the users $1 (sorted, distinct) in UserID order: one index scan
	// over the sorted array, whose rows are locked as it returns them.
	sqlLockUsers = `SELECT count(*) FROM (SELECT 1 FROM rota_users u WHERE u.user_id = ANY($1::text[])
		ORDER BY u.user_id FOR NO KEY UPDATE) l`
)

var (
	// sqlRecompute sets free_at, claim_end_at, slot_at and turn of the users $1, whose rows
	// the caller has locked. A user whose free_at, claim_end_at and slot_at are already right
	// is not written.
	sqlRecompute = recomputeOf(freeAtOfK, `(SELECT m.user_id, m.max_in_flight AS m FROM unnest($1::text[]) AS k(user_id)
		JOIN rota_users m ON m.user_id = k.user_id) k`)
	// sqlRecomputeLocked is sqlRecompute of the users named in rota.locked (see sqlLocked),
	// after a write that only returned claimed entries to the unclaimed ones: such a write
	// can only lower free_at, to the least due_at it gave them (rota.freed), so free_at is
	// the lesser of that and the stored one, with no probe. The stored one is exact for
	// everything but this transaction's own writes, as every write of a user's entries
	// sets it under the user's lock, which this transaction holds (see "ReadyAt and locks").
	sqlRecomputeLocked = recomputeOf("least(k.stored, k.freed)", `(SELECT k.user_id, k.m, k.freed, o.free_at AS stored
		FROM unnest(current_setting('rota.locked', true)::text[], current_setting('rota.caps', true)::int[],
			current_setting('rota.freed', true)::timestamptz[]) AS k(user_id, m, freed)
		JOIN rota_users o ON o.user_id = k.user_id) k`)
)

// recomputeOf is the UPDATE of sqlRecompute for the users of from, a FROM item k(user_id,
// m) of their IDs and caps, with freeAt their free_at.
func recomputeOf(freeAt, from string) string {
	return `UPDATE rota_users u SET free_at = n.free_at, claim_end_at = n.claim_end_at, slot_at = n.slot_at,
		turn = ` + turnOf("n.free_at", "n.claim_end_at", "n.slot_at", "u.rate_mark", "u.every", "u.burst", "u.pass", "u.paused_until", "u.last_served") + `
		FROM (SELECT k.user_id, ` + freeAt + ` AS free_at, ` + claimEndAtOfK + ` AS claim_end_at, ` + slotAt("k.user_id", "k.m") + ` AS slot_at
			FROM ` + from + ` OFFSET 0) n
		WHERE u.user_id = n.user_id AND (u.free_at, u.claim_end_at, u.slot_at) IS DISTINCT FROM (n.free_at, n.claim_end_at, n.slot_at)`
}

// sqlLocked names, in transaction-local settings, the users l(user_id, max_in_flight,
// freed) locked: rota.locked their IDs, rota.caps their caps and rota.freed the least
// due_at the write gave their entries, in one order (the aggregates of one query take its
// rows in the same order, so the arrays stay aligned without a sort). The next statement
// of the batch finds them there (sqlRecomputeLocked). It is the final SELECT's one-time
// filter, so it runs once, before the SELECT returns a row, and always.
const sqlLocked = `(SELECT set_config('rota.locked', coalesce(array_agg(l.user_id), '{}')::text, true) ||
	set_config('rota.caps', coalesce(array_agg(l.max_in_flight), '{}')::text, true) ||
	set_config('rota.freed', coalesce(array_agg(l.freed), '{}')::text, true) FROM l) IS NOT NULL`

// claimEndAtOf is the claim_end_at of the user whose ID is the column user: see claimEndAtOfK.
func claimEndAtOf(user string) string {
	return `(SELECT greatest(d.due_at, d.claim_until) FROM rota_due d
			 WHERE (d.user_id, greatest(d.due_at, d.claim_until)) BETWEEN (` + user + `, '-infinity') AND (` + user + `, 'infinity')
			   AND d.claim_until IS NOT NULL
			 ORDER BY d.user_id, greatest(d.due_at, d.claim_until) LIMIT 1)`
}

// freeAtOfK and claimEndAtOfK are the two halves of the ReadyAt of the user k.user_id, each
// a keyset probe (see "Per-user reads" above): the due_at of its first unclaimed entry in
// rota_due_free_user, and the greatest(due_at, claim_until) of its first claimed entry in
// rota_due_claimed_user. The statements that use them read k in a subquery with OFFSET 0,
// which keeps it from being pulled up into an UPDATE, where the probes would run twice
// (SET and WHERE).
var (
	freeAtOfK = `(SELECT d.due_at FROM rota_due d
			 WHERE (d.user_id, d.due_at) BETWEEN (k.user_id, '-infinity') AND (k.user_id, 'infinity')
			   AND d.claim_until IS NULL
			 ORDER BY d.user_id, d.due_at LIMIT 1)`
	claimEndAtOfK = claimEndAtOf("k.user_id")
)

// write is one statement of a batch and its arguments.
type write struct {
	sql  string
	args []any
}

// writeOne runs one write of a user's entries and keeps the user's ReadyAt exact,
// atomically and in one round trip: the statements go as one pgx batch, which the server
// runs as one implicit transaction, each statement with its own snapshot. result, when not
// nil, turns the entry write's row count into the call's error; ReadyAt is recomputed either
// way (recomputing an unchanged user changes nothing). then are statements that follow the
// write (a notification). The entry write locks entry rows only, then the user's row is
// locked: the lock order above.
func (x *Index) writeOne(ctx context.Context, op, user string, ensure bool, result func(rowsAffected int64) error, w write, then ...write) error {
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(w.sql, w.args...)
	for _, t := range then {
		b.Queue(t.sql, t.args...)
	}
	if ensure {
		b.Queue(sqlEnsureUser, user)
	}
	b.Queue(sqlLockUser, user)
	b.Queue(sqlRecompute, []string{user})
	br := x.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
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

// sendBatch runs b in one round trip and one transaction: statements whose results are not
// read, and at position query (counting from 0) a query whose rows scan reads one at a time.
func (x *Index) sendBatch(ctx context.Context, b *pgx.Batch, query int, scan func(pgx.Rows) error) error {
	br := x.pool.SendBatch(ctx, b)
	defer br.Close()
	for i := range b.Len() {
		if i != query {
			if _, err := br.Exec(); err != nil {
				return err
			}
			continue
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				rows.Close()
				return err
			}
		}
		if rows.Close(); rows.Err() != nil {
			return rows.Err()
		}
	}
	return br.Close()
}

// exec runs statements under settings (sqlHoldSettings for Route and Release,
// sqlPlanSettings for Pause and Resume, which are written durably), in one round trip.
func (x *Index) exec(ctx context.Context, op, settings string, ws ...write) error {
	b := &pgx.Batch{}
	b.Queue(settings)
	for _, w := range ws {
		b.Queue(w.sql, w.args...)
	}
	return interpret(ctx, op, x.pool.SendBatch(ctx, b).Close())
}

// Schedule inserts or replaces tc's entry e.WorkKey. Replacing a claimed entry ends the
// claim: the claimant's Complete then gets duework.ErrClaimLost. A user's first Schedule
// puts it in the unrouted group "". An entry due by the server's now wakes the listeners
// of ListenDue.
func (x *Index) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	return x.writeOne(ctx, "Index.Schedule", e.UserID, true, nil, write{`
		INSERT INTO rota_due (user_id, work_key, tier, due_at, last_run_at, miss_streak, error_streak)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (user_id, work_key) DO UPDATE SET
			tier = EXCLUDED.tier, due_at = EXCLUDED.due_at, last_run_at = EXCLUDED.last_run_at,
			miss_streak = EXCLUDED.miss_streak, error_streak = EXCLUDED.error_streak,
			claim_token = NULL, claim_until = NULL, claim_started = false`,
		[]any{e.UserID, e.WorkKey, e.Tier, e.DueAt, ts(e.LastRunAt), e.MissStreak, e.ErrorStreak}},
		write{sqlNotifyIfDue, []any{e.DueAt}})
}

// ScheduleMissing inserts each of entries (all tc's) whose WorkKey tc does not have yet,
// and leaves the others exactly as they are, claims included; it returns how many it
// inserted. A WorkKey given twice is inserted at most once, the first one winning. Invalid
// input is duework.ErrInvalid and writes nothing. When an entry it inserts is due by the
// server's now, it wakes the listeners of ListenDue, once for the call.
//
// The whole batch is one round trip: one INSERT … ON CONFLICT DO NOTHING of every entry, in
// WorkKey order (so two concurrent calls for one tenant lock new keys in the same order),
// then the user's ReadyAt.
func (x *Index) ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (int, error) {
	if err := tc.Check(); err != nil {
		return 0, err
	}
	if err := vocab.Each("entries", entries, func(e duework.Entry) error { return e.Validate(tc) }); err != nil {
		return 0, err
	}
	if len(entries) == 0 {
		return 0, ctx.Err()
	}
	first := make([]duework.Entry, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !seen[e.WorkKey] {
			seen[e.WorkKey] = true
			first = append(first, e)
		}
	}
	slices.SortFunc(first, func(a, b duework.Entry) int { return strings.Compare(a.WorkKey, b.WorkKey) })
	n := len(first)
	keys, tiers := make([]string, n), make([]string, n)
	due, last := make([]time.Time, n), make([]*time.Time, n)
	streaks, errs := make([]int64, n), make([]int64, n)
	for i, e := range first {
		keys[i], tiers[i], due[i], last[i] = e.WorkKey, e.Tier, e.DueAt, ts(e.LastRunAt)
		streaks[i], errs[i] = int64(e.MissStreak), int64(e.ErrorStreak)
	}
	var added int64
	err := x.writeOne(ctx, "Index.ScheduleMissing", tc.UserID(), true, func(n int64) error { added = n; return nil }, write{`
		WITH ins AS (
			INSERT INTO rota_due (user_id, work_key, tier, due_at, last_run_at, miss_streak, error_streak)
			SELECT $1, k.work_key, k.tier, k.due_at, k.last_run_at, k.miss_streak, k.error_streak
			FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::bigint[], $7::bigint[])
				WITH ORDINALITY AS k(work_key, tier, due_at, last_run_at, miss_streak, error_streak, ord)
			ORDER BY k.ord
			ON CONFLICT (user_id, work_key) DO NOTHING
			RETURNING due_at
		)
		SELECT 1 FROM ins WHERE (SELECT CASE WHEN bool_or(i.due_at <= now()) THEN pg_notify(` + sqlDueChannel + `, '') IS NOT NULL ELSE true END FROM ins i)`,
		[]any{tc.UserID(), keys, tiers, due, last, streaks, errs}})
	if err != nil {
		return 0, err
	}
	return int(added), nil
}

// Unschedule removes tc's entry workKey whatever its claim; an absent entry is not an error.
func (x *Index) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := vocab.Name(duework.ErrInvalid, "WorkKey", workKey); err != nil {
		return err
	}
	return x.writeOne(ctx, "Index.Unschedule", tc.UserID(), false, nil,
		write{`DELETE FROM rota_due WHERE user_id = $1 AND work_key = $2`, []any{tc.UserID(), workKey}})
}

const entryColumns = `d.user_id, d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak, d.error_streak`

// scanEntry reads entryColumns.
func scanEntry(row pgx.Row, extra ...any) (duework.Entry, error) {
	var e duework.Entry
	var last *time.Time
	var streak, errs int64
	err := row.Scan(append([]any{&e.UserID, &e.WorkKey, &e.Tier, &e.DueAt, &last, &streak, &errs}, extra...)...)
	e.LastRunAt = fromTS(last)
	e.MissStreak, e.ErrorStreak = int(streak), int(errs)
	return e, err
}

// internSet hands out one string per distinct value read, so that a read of many rows that
// repeat a few user IDs or tiers allocates a few strings.
type internSet map[string]string

// of returns b as a string, which it copies the first time it sees it.
func (t *internSet) of(b []byte) string {
	if s, ok := (*t)[string(b)]; ok {
		return s
	}
	if *t == nil {
		*t = internSet{}
	}
	s := string(b)
	(*t)[s] = s
	return s
}

// Get returns tc's entry workKey, claimed or not, or duework.ErrNotFound.
func (x *Index) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	if err := tc.Check(); err != nil {
		return duework.Entry{}, err
	}
	if err := vocab.Name(duework.ErrInvalid, "WorkKey", workKey); err != nil {
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

// DueBefore returns at most limit entries visible at now, ordered by (DueAt, UserID,
// WorkKey). It reads the limit first unclaimed rows of the due index and the rows whose
// claims ended, so its cost grows with limit and with the number of ended claims, not with
// the backlog.
func (x *Index) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
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
