package postgres

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rotaworks/rota/duework"
)

// sqlReady is the whole of Ready, one statement:
//
//   - picked: the group's first $3 users with turn <= now that are not held at now, in
//     (turn, user_id) order — the front of the range of rota_users_queue — locked FOR NO KEY
//     UPDATE SKIP LOCKED, so that a concurrent Ready (another dispatcher) or a writer of that
//     user passes it instead of waiting: concurrent readers get disjoint users;
//   - held: held_until = $5 on those rows (found by ctid: they are locked), a HOT update;
//     the users read are the ones it wrote — a row that another transaction changed after
//     this statement began is not visible to it and is passed over, like a locked one;
//   - part 0: each user's first $4 unclaimed entries with due_at <= now, a keyset range of
//     rota_due_free_user in (due_at, work_key) order; part 1: its first $4 claims that have
//     ended, read from rota_due_claimed_user (the user's claimed rows by the instant they
//     end; only that index holds them by user, so an equality serves) and sorted: never
//     more of its backlog than that, nor more of its claims than those that ended. Ready
//     merges the two parts of a user;
//   - part 2: the turn of the first ready, unheld user after the last one picked,
//     ReadyPage.Next.
//
// It cannot deadlock: it locks only user rows and never waits for one (SKIP LOCKED). Its
// cost is the users it returns, their entries, and the held or locked users it passes.
// sqlPeek is the same without a hold: held is then picked as it is.
const sqlReady = sqlPicked + `, held AS MATERIALIZED (
	UPDATE rota_users u SET held_until = $5
	WHERE u.ctid = ANY(ARRAY(SELECT p.tid FROM picked p))
	RETURNING u.user_id, u.last_served, u.turn, u.claim_end_at
)` + sqlReadParts

const sqlPeek = sqlPicked + `, held AS (
	SELECT p.user_id, p.last_served, p.turn, p.claim_end_at FROM picked p WHERE $5::timestamptz IS NULL
)` + sqlReadParts

// sqlPicked is the picked step of sqlReady and sqlPeek: the front of the group's queue,
// locked with SKIP LOCKED.
const sqlPicked = `
WITH picked AS MATERIALIZED (
	SELECT u.ctid AS tid, u.user_id, u.last_served, u.turn, u.claim_end_at FROM rota_users u
	WHERE u.group_name = $1 AND u.turn <= $2 AND (u.held_until IS NULL OR u.held_until <= $2)
	ORDER BY u.group_name, u.turn, u.user_id
	LIMIT $3
	FOR NO KEY UPDATE SKIP LOCKED
)`

const sqlReadParts = `
SELECT 0 AS part, h.user_id, h.last_served, h.turn, e.work_key, e.tier, e.due_at, e.last_run_at, e.miss_streak
FROM held h CROSS JOIN LATERAL (
	SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak FROM rota_due d
	WHERE (d.user_id, d.due_at) BETWEEN (h.user_id, '-infinity') AND (h.user_id, $2)
	  AND d.claim_until IS NULL
	ORDER BY d.user_id, d.due_at, d.work_key LIMIT $4) e
UNION ALL
SELECT 1, h.user_id, h.last_served, h.turn, e.work_key, e.tier, e.due_at, e.last_run_at, e.miss_streak
FROM held h CROSS JOIN LATERAL (
	SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak FROM rota_due d
	WHERE d.user_id = h.user_id AND greatest(d.due_at, d.claim_until) <= $2 AND d.claim_until IS NOT NULL
	ORDER BY d.due_at, d.work_key LIMIT $4) e
WHERE h.claim_end_at <= $2
UNION ALL
(SELECT 2, NULL, NULL, n.turn, NULL, NULL, NULL, NULL, NULL FROM rota_users n
 WHERE n.group_name = $1 AND n.turn <= $2 AND (n.held_until IS NULL OR n.held_until <= $2)
   AND (n.turn, n.user_id) > (
	coalesce((SELECT p.turn FROM picked p ORDER BY p.turn DESC, p.user_id DESC LIMIT 1), '-infinity'),
	coalesce((SELECT p.user_id FROM picked p ORDER BY p.turn DESC, p.user_id DESC LIMIT 1), ''))
 ORDER BY n.group_name, n.turn, n.user_id LIMIT 1)`

// Ready returns up to q.Users users of q.Group that are ready and not held at q.Now, in
// (Turn, UserID) order, each with its first q.PerUser visible entries in (DueAt, WorkKey)
// order, and holds them until q.Now+q.Hold (rounded up to the microsecond) when q.Hold > 0.
//
// It is one round trip and one statement (see the package documentation): it locks the
// users it reads with SKIP LOCKED, so a Ready on another connection at the same moment
// reads other users, and a user that a concurrent call is writing is passed over, keeping
// its Turn. Its cost is what it returns and the held users it passes, never the number of
// ready users of the group nor any user's backlog.
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
	b := &pgx.Batch{}
	b.Queue(sqlHoldSettings)
	b.Queue(sql, q.Group, q.Now, q.Users, q.PerUser+1, heldUntil)
	var (
		part                   int32
		user, workKey, tier    pgtype.Text
		served, due, last, rtn pgtype.Timestamptz
		streak                 pgtype.Int8
	)
	err := x.sendBatch(ctx, b, func(rows pgx.Rows) error {
		if err := rows.Scan(&part, &user, &served, &rtn, &workKey, &tier, &due, &last, &streak); err != nil {
			return err
		}
		if part == 2 {
			page.Next = rtn.Time
			return nil
		}
		i, ok := heads[user.String]
		if !ok {
			i = len(page.Heads)
			heads[user.String] = i
			page.Heads = append(page.Heads, duework.Head{UserID: user.String, LastServed: served.Time, Turn: rtn.Time})
		}
		page.Heads[i].Due = append(page.Heads[i].Due, duework.Entry{
			UserID: page.Heads[i].UserID, WorkKey: workKey.String, Tier: tier.String, DueAt: due.Time, LastRunAt: last.Time, MissStreak: int(streak.Int64),
		})
		return nil
	})
	if err != nil {
		return duework.ReadyPage{}, interpret(ctx, "Index.Ready", err)
	}
	slices.SortFunc(page.Heads, func(a, b duework.Head) int {
		return cmp.Or(a.Turn.Compare(b.Turn), strings.Compare(a.UserID, b.UserID))
	})
	for i := range page.Heads {
		h := &page.Heads[i]
		slices.SortFunc(h.Due, func(a, b duework.Entry) int {
			return cmp.Or(a.DueAt.Compare(b.DueAt), strings.Compare(a.WorkKey, b.WorkKey))
		})
		if len(h.Due) > q.PerUser {
			h.Due, h.More = h.Due[:q.PerUser:q.PerUser], true
		}
	}
	return page, nil
}

// Route moves each named user to its group; the last route of a user given twice wins.
// Users the index does not store (and IDs no user could have) are ignored. A user keeps its
// Turn and hold. One statement, which locks the users' rows in UserID order and holds no
// entry, so it cannot deadlock.
func (x *Index) Route(ctx context.Context, routes []duework.Route) error {
	if err := duework.ValidateRoutes(routes); err != nil {
		return err
	}
	last := make(map[string]string, len(routes))
	for _, r := range routes {
		last[r.UserID] = r.Group
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	users := validUsers(ids)
	if len(users) == 0 {
		return ctx.Err()
	}
	groups := make([]string, len(users))
	for i, u := range users {
		groups[i] = last[u]
	}
	return x.exec(ctx, "Index.Route", `
		WITH l AS (
			SELECT u.user_id FROM rota_users u WHERE u.user_id = ANY($1::text[])
			ORDER BY u.user_id FOR NO KEY UPDATE
		)
		UPDATE rota_users u SET group_name = r.group_name
		FROM unnest($1::text[], $2::text[]) AS r(user_id, group_name)
		WHERE u.user_id = r.user_id AND u.group_name <> r.group_name AND (SELECT count(*) FROM l) >= 0`, users, groups)
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
	if err := duework.ValidateTime("now", now); err != nil {
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
	if err := duework.ValidateTime("heldUntil", heldUntil); err != nil {
		return err
	}
	users := validUsers(userIDs)
	if len(users) == 0 {
		return ctx.Err()
	}
	return x.exec(ctx, "Index.Release", `
		WITH l AS (
			SELECT u.user_id FROM rota_users u WHERE u.user_id = ANY($1::text[]) AND u.held_until = $2
			ORDER BY u.user_id FOR NO KEY UPDATE
		)
		UPDATE rota_users u SET held_until = NULL FROM l WHERE u.user_id = l.user_id AND u.held_until = $2`,
		users, ceilMicro(heldUntil))
}
