package postgres

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
)

// sqlReady is the whole of Ready, one statement:
//
//   - picked: the group's first $3 users with turn <= now that are not held at now, in
//     (turn, user_id) order — the front of the range of rota_users_queue — locked FOR NO KEY
//     UPDATE SKIP LOCKED, so that a concurrent Ready (another dispatcher) or a writer of that
//     user passes it instead of waiting: concurrent readers get disjoint users;
//   - held: held_until = $5 on those rows (found by ctid: they are locked), a HOT update;
//     the users read are the ones it wrote — a row that another transaction changed after
//     this statement began is not visible to it and is passed over, like a locked one —
//     sorted again in (turn, user_id) order, which the write does not keep, so that the
//     rows come back in the order of the page's heads and Ready's sort of them has
//     nothing to move;
//   - heads: each user's in-flight count (a probe of its claims, only when it has any) and
//     cap, the most Due entries it gets: the least of its free slots, its rate allowance at
//     $6 (now in nanoseconds) and $4 (PerUser) × its weight;
//   - part 0: each user's first cap+1 unclaimed entries with due_at <= now, a keyset range of rota_due_free_user in
//     (due_at, work_key) order; part 1: its first cap+1 claims that have ended, read from
//     rota_due_claimed_user (the user's claimed rows by the instant they end; only that
//     index holds them by user, so an equality serves) and sorted: never more of its
//     backlog than that, nor more of its claims than those that ended. Each row carries its
//     user's LastServed, Turn, limits, in-flight count and cap, NULL where they are zero
//     (the cap where it is PerUser), which is most users' and quick to read. Ready merges
//     the two parts of a user;
//   - part 2: the turn of the first ready, unheld user after the last one picked,
//     ReadyPage.Next.
//
// It cannot deadlock: it locks only user rows and never waits for one (SKIP LOCKED). Its
// cost is the users it returns, their entries and claims in flight, and the held or
// locked users it passes. sqlPeek is the same without a hold: held is then picked as it
// is.
var sqlReady = sqlPicked + `, holds AS MATERIALIZED (
	UPDATE rota_users u SET held_until = $5
	WHERE u.ctid = ANY(ARRAY(SELECT p.tid FROM picked p))
	RETURNING ` + readColumns("u") + `
), held AS (
	SELECT * FROM holds h ORDER BY h.turn, h.user_id
)` + sqlReadParts

var sqlPeek = sqlPicked + `, held AS (
	SELECT ` + readColumns("p") + ` FROM picked p WHERE $5::timestamptz IS NULL
)` + sqlReadParts

// readColumns are the columns of rota_users (aliased t) that Ready reads.
func readColumns(t string) string {
	return t + ".user_id, " + t + ".last_served, " + t + ".turn, " + t + ".claim_end_at, " + t + ".weight, " + t + ".max_in_flight, " +
		t + ".every, " + t + ".burst, " + t + ".rate_mark"
}

// sqlPicked is the picked step of sqlReady and sqlPeek: the front of the group's queue,
// locked with SKIP LOCKED.
var sqlPicked = `
WITH picked AS MATERIALIZED (
	SELECT u.ctid AS tid, ` + readColumns("u") + ` FROM rota_users u
	WHERE u.group_name = $1 AND u.turn <= $2 AND (u.held_until IS NULL OR u.held_until <= $2)
	ORDER BY u.group_name, u.turn, u.user_id
	LIMIT $3
	FOR NO KEY UPDATE SKIP LOCKED
)`

var sqlReadParts = `, heads AS MATERIALIZED (
	SELECT f.user_id, f.last_served, f.turn, f.claim_end_at, f.weight, f.max_in_flight, f.every, f.burst, f.in_flight,
		least(` + slotAllowance("f.max_in_flight", "f.in_flight") + `, ` + rateAllowance("f.rate_mark", "f.every", "f.burst", "$6::numeric") + `,
			$4::bigint * greatest(f.weight, 1))::bigint AS cap
	FROM (SELECT h.*, CASE WHEN h.claim_end_at IS NULL THEN 0 ELSE ` + inFlight("h.user_id", "$2::timestamptz") + ` END AS in_flight
		FROM held h OFFSET 0) f
)
SELECT 0 AS part, h.user_id, h.last_served, h.turn, e.work_key, e.tier, e.due_at, e.last_run_at, e.miss_streak, e.error_streak,
	nullif(h.weight, 0)::bigint AS weight, nullif(h.max_in_flight, 0)::bigint AS max_in_flight, nullif(h.every, 0) AS every,
	nullif(h.burst, 0)::bigint AS burst, nullif(h.in_flight, 0) AS in_flight, nullif(h.cap, $4) AS cap
FROM heads h CROSS JOIN LATERAL (
	SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak, d.error_streak FROM rota_due d
	WHERE (d.user_id, d.due_at) BETWEEN (h.user_id, '-infinity') AND (h.user_id, $2)
	  AND d.claim_until IS NULL
	ORDER BY d.user_id, d.due_at, d.work_key LIMIT h.cap + 1) e
UNION ALL
SELECT 1, h.user_id, h.last_served, h.turn, e.work_key, e.tier, e.due_at, e.last_run_at, e.miss_streak, e.error_streak,
	nullif(h.weight, 0), nullif(h.max_in_flight, 0), nullif(h.every, 0), nullif(h.burst, 0), nullif(h.in_flight, 0), nullif(h.cap, $4)
FROM heads h CROSS JOIN LATERAL (
	SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak, d.error_streak FROM rota_due d
	WHERE d.user_id = h.user_id AND greatest(d.due_at, d.claim_until) <= $2 AND d.claim_until IS NOT NULL
	ORDER BY d.due_at, d.work_key LIMIT h.cap + 1) e
WHERE h.claim_end_at <= $2
UNION ALL
(SELECT 2, NULL, NULL, n.turn, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM rota_users n
 WHERE n.group_name = $1 AND n.turn <= $2 AND (n.held_until IS NULL OR n.held_until <= $2)
   AND (n.turn, n.user_id) > (
	coalesce((SELECT p.turn FROM picked p ORDER BY p.turn DESC, p.user_id DESC LIMIT 1), '-infinity'),
	coalesce((SELECT p.user_id FROM picked p ORDER BY p.turn DESC, p.user_id DESC LIMIT 1), ''))
 ORDER BY n.group_name, n.turn, n.user_id LIMIT 1)`

// Ready returns up to q.Users users of q.Group that are ready and not held at q.Now, in
// (Turn, UserID) order, each with its limits, its in-flight count and its first visible
// entries in (DueAt, WorkKey) order — as many as its limits allow at q.Now and at most
// q.PerUser × its weight — and holds them until q.Now+q.Hold (rounded up to the
// microsecond) when q.Hold > 0.
//
// It is one round trip and one statement (see the package documentation): it locks the
// users it reads with SKIP LOCKED, so a Ready on another connection at the same moment
// reads other users, and a user that a concurrent call is writing is passed over, keeping
// its Turn. Its cost is what it returns, the claims in flight of the users it returns and
// the held users it passes, never the number of ready users of the group nor any user's
// backlog.
func (x *Index) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	if err := q.Validate(); err != nil {
		return duework.ReadyPage{}, err
	}
	sql, heldUntil := sqlPeek, (*time.Time)(nil)
	if q.Hold > 0 {
		h := ceilMicro(q.Now.Add(q.Hold))
		sql, heldUntil = sqlReady, &h
	}
	var page duework.ReadyPage
	heads := map[string]int{} // user → index in page.Heads
	caps := []int64{}         // by index in page.Heads: the most Due entries it gets
	b := &pgx.Batch{}
	b.Queue(sqlHoldSettings + sqlSortOff)
	b.Queue(sql, q.Group, q.Now, q.Users, q.PerUser, heldUntil, nanosOf(q.Now))
	var (
		part                           int32
		workKey                        pgtype.Text
		served, due, last, rtn         pgtype.Timestamptz
		streak, errs, weight, m, every pgtype.Int8
		burst, inFlight, cap           pgtype.Int8
	)
	var tiers internSet
	rb := readBufs.Get().(*readBuf)
	defer rb.put()
	read, of := rb.read[:0], rb.of[:0] // every entry read, as the rows came, and the head of each
	dest := []any{&part, nil, &served, &rtn, &workKey, nil, &due, &last, &streak, &errs, &weight, &m, &every, &burst, &inFlight, &cap}
	err := x.sendBatch(ctx, b, 1, func(rows pgx.Rows) error {
		// The user's ID and the tier, which repeat from row to row, are read from the
		// row's bytes: one string per head and per tier, not per row.
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if part == 2 {
			page.Next = rtn.Time
			return nil
		}
		raw := rows.RawValues()
		i, ok := heads[string(raw[1])]
		if !ok {
			i = len(page.Heads)
			user := string(raw[1])
			heads[user] = i
			n := int64(q.PerUser)
			if cap.Valid {
				n = cap.Int64
			}
			caps = append(caps, n)
			page.Heads = append(page.Heads, duework.Head{
				UserID: user, LastServed: served.Time, Turn: rtn.Time, InFlight: int(inFlight.Int64),
				Limits: duework.Limits{Weight: int(weight.Int64), MaxInFlight: int(m.Int64), Every: time.Duration(every.Int64), Burst: int(burst.Int64)},
			})
		}
		read = append(read, duework.Entry{
			UserID: page.Heads[i].UserID, WorkKey: workKey.String, Tier: tiers.of(raw[5]), DueAt: due.Time, LastRunAt: last.Time,
			MissStreak: int(streak.Int64), ErrorStreak: int(errs.Int64),
		})
		of = append(of, int32(i))
		return nil
	})
	rb.read, rb.of = read, of
	if err != nil {
		return duework.ReadyPage{}, interpret(ctx, "Index.Ready", err)
	}
	finishPage(&page, read, of, caps)
	return page, nil
}

// readBuf holds what Ready reads before finishPage copies it into the page: reused from
// call to call (readBufs), as a dispatcher's Ready reads about as many rows each cycle.
type readBuf struct {
	read []duework.Entry
	of   []int32
}

var readBufs = sync.Pool{New: func() any { return new(readBuf) }}

// maxReadBuf is the most entries a readBuf keeps room for once put back.
const maxReadBuf = 1 << 14

// put clears b's entries, which hold strings of the page, and puts b back in readBufs
// unless it grew beyond maxReadBuf.
func (b *readBuf) put() {
	if cap(b.read) > maxReadBuf {
		return
	}
	clear(b.read)
	b.read, b.of = b.read[:0], b.of[:0]
	readBufs.Put(b)
}

// finishPage gives each head of page its entries of read (of[k] is the head of read[k]),
// in (DueAt, WorkKey) order and cut to its cap (caps, with More where it had more), and
// sorts the heads by (Turn, UserID). The entries go in one array, each head's a run of it,
// capped at its length so that appending to one head's Due never writes into the next
// one's.
func finishPage(page *duework.ReadyPage, read []duework.Entry, of []int32, caps []int64) {
	ends := make([]int, len(page.Heads))
	for _, i := range of {
		ends[i]++
	}
	for i := 1; i < len(ends); i++ {
		ends[i] += ends[i-1]
	}
	all := make([]duework.Entry, len(read))
	for k := len(read) - 1; k >= 0; k-- {
		i := of[k]
		ends[i]--
		all[ends[i]] = read[k]
	}
	for i := range page.Heads {
		hi := len(all)
		if i+1 < len(ends) {
			hi = ends[i+1]
		}
		h := &page.Heads[i]
		h.Due = all[ends[i]:hi:hi]
		slices.SortFunc(h.Due, func(a, b duework.Entry) int {
			return cmp.Or(a.DueAt.Compare(b.DueAt), strings.Compare(a.WorkKey, b.WorkKey))
		})
		if n := int(caps[i]); len(h.Due) > n {
			h.Due, h.More = h.Due[:n:n], true
		}
	}
	slices.SortFunc(page.Heads, func(a, b duework.Head) int {
		return cmp.Or(a.Turn.Compare(b.Turn), strings.Compare(a.UserID, b.UserID))
	})
}

// sqlRoute is Route's write, after sqlLockUsers locked the users $1 in UserID order, with
// a snapshot that sees every claim committed before the locks: it stores each user's group
// and limits ($2 groups, $3 weights, $4 caps, $5 every in nanoseconds, $6 bursts) and sets
// slot_at (probed for a user with a cap) and turn from them. A user whose group and limits
// are already those is not written.
var sqlRoute = `UPDATE rota_users u SET group_name = r.group_name, weight = r.weight, max_in_flight = r.m, every = r.every, burst = r.burst,
		slot_at = r.slot_at,
		turn = ` + turnOf("u.free_at", "u.claim_end_at", "r.slot_at", "u.rate_mark", "r.every", "r.burst", "u.pass", "u.paused_until", "u.last_served") + `
	FROM (SELECT k.*, ` + slotAt("k.user_id", "k.m") + ` AS slot_at
		FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::bigint[], $6::int[]) AS k(user_id, group_name, weight, m, every, burst)
		OFFSET 0) r
	WHERE u.user_id = r.user_id
	  AND (u.group_name, u.weight, u.max_in_flight, u.every, u.burst) IS DISTINCT FROM (r.group_name, r.weight, r.m, r.every, r.burst)`

// Route moves each named user to its group and stores its limits; the last route of a user
// given twice wins. Users the index does not store (and IDs no user could have) are
// ignored. Invalid limits are duework.ErrInvalid and nothing is written. A user keeps its
// hold, LastServed and stride position; its Turn follows its new limits. One round trip
// of two statements, which lock the users' rows in UserID order (sqlLockUsers) and then
// write each once (sqlRoute), holding no entry, so they cannot deadlock.
func (x *Index) Route(ctx context.Context, routes []duework.Route) error {
	if err := vocab.Each("routes", routes, duework.Route.Validate); err != nil {
		return err
	}
	last := make(map[string]duework.Route, len(routes))
	for _, r := range routes {
		last[r.UserID] = r
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	users := validUsers(ids)
	if len(users) == 0 {
		return ctx.Err()
	}
	n := len(users)
	groups := make([]string, n)
	weights, caps, bursts := make([]int32, n), make([]int32, n), make([]int32, n)
	every := make([]int64, n)
	for i, u := range users {
		r := last[u]
		groups[i] = r.Group
		weights[i], caps[i], bursts[i] = int32(r.Limits.Weight), int32(r.Limits.MaxInFlight), int32(r.Limits.Burst)
		every[i] = int64(r.Limits.Every)
	}
	return x.exec(ctx, "Index.Route", sqlHoldSettings, write{sqlLockUsers, []any{users}}, write{sqlRoute, []any{users, groups, weights, caps, every, bursts}})
}

// sqlGroups lists the groups with a user ready at $1 by a loose index scan of
// rota_users_queue: the recursion jumps from one group's first entry, which holds its
// earliest turn, to the next group's, so it reads one index entry per group, never the
// users.
const sqlGroups = `
WITH RECURSIVE g(name, turn) AS (
	(SELECT u.group_name, u.turn FROM rota_users u WHERE u.turn IS NOT NULL
	 ORDER BY u.group_name, u.turn LIMIT 1)
	UNION ALL
	SELECT n.group_name, n.turn FROM g CROSS JOIN LATERAL (
		SELECT u.group_name, u.turn FROM rota_users u WHERE u.group_name > g.name AND u.turn IS NOT NULL
		ORDER BY u.group_name, u.turn LIMIT 1) n
)
SELECT g.name FROM g WHERE g.turn <= $1 ORDER BY g.name`

// Groups returns, sorted bytewise, the groups that hold a user ready at now. It reads one
// index entry per group that has a user with entries, whatever the number of users.
func (x *Index) Groups(ctx context.Context, now time.Time) ([]string, error) {
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	rows, err := x.pool.Query(ctx, sqlGroups, now)
	if err != nil {
		return nil, interpret(ctx, "Index.Groups", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, interpret(ctx, "Index.Groups", err)
	}
	return out, nil
}

// Release ends the holds of the named users that end exactly at heldUntil, rounded up to
// the microsecond as Ready rounds the holds it stores: a reader passes its own Now+Hold,
// nanoseconds and all, and matches its hold (and any hold set to the same microsecond).
// Turns stay as they were. One statement, which locks the users' rows in UserID order and
// holds no entry, so it cannot deadlock.
func (x *Index) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	if err := vocab.Time(duework.ErrInvalid, "heldUntil", heldUntil); err != nil {
		return err
	}
	users := validUsers(userIDs)
	if len(users) == 0 {
		return ctx.Err()
	}
	return x.exec(ctx, "Index.Release", sqlHoldSettings, write{`
		WITH l AS (
			SELECT u.user_id FROM rota_users u WHERE u.user_id = ANY($1::text[]) AND u.held_until = $2
			ORDER BY u.user_id FOR NO KEY UPDATE
		)
		UPDATE rota_users u SET held_until = NULL FROM l WHERE u.user_id = l.user_id AND u.held_until = $2`,
		[]any{users, ceilMicro(heldUntil)}})
}
