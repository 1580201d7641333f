package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotaworks/rota/duework"
)

// sqlReady is the whole of Ready, one statement:
//
//   - picked: the group's first $3 users with turn <= now that are not held at now, in
//     (turn, user_id) order — the front of the range of rota_users_queue — locked FOR NO KEY
//     UPDATE SKIP LOCKED, so that a concurrent Ready (another dispatcher) or a writer of that
//     user passes it instead of waiting: concurrent readers get disjoint users;
//   - page: each picked user's first $4 visible entries in (due_at, work_key) order, from a
//     keyset range of its unclaimed rows (rota_due_free_user) merged with its claims that
//     have ended (rota_due_claimed_user): never more of its backlog than that;
//   - held: held_until = $5 on the users returned (when $5 is not NULL), on rows already
//     locked by picked;
//   - the last row: the turn of the first ready, unheld user after the last one picked,
//     ReadyPage.Next.
//
// It cannot deadlock: it locks only user rows and never waits for one (SKIP LOCKED). Its
// cost is the users it returns, their entries, and the held or locked users it passes.
const sqlReady = `
WITH picked AS MATERIALIZED (
	SELECT u.user_id, u.last_served, u.turn FROM rota_users u
	WHERE u.group_name = $1 AND u.turn <= $2 AND (u.held_until IS NULL OR u.held_until <= $2)
	ORDER BY u.group_name, u.turn, u.user_id
	LIMIT $3
	FOR NO KEY UPDATE SKIP LOCKED
), page AS MATERIALIZED (
	SELECT p.user_id, p.last_served, p.turn, e.work_key, e.tier, e.due_at, e.last_run_at, e.miss_streak
	FROM picked p CROSS JOIN LATERAL (
		SELECT v.* FROM (
			(SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak FROM rota_due d
			 WHERE (d.user_id, d.due_at) BETWEEN (p.user_id, '-infinity') AND (p.user_id, $2)
			   AND d.claim_until IS NULL
			 ORDER BY d.user_id, d.due_at, d.work_key LIMIT $4)
			UNION ALL
			(SELECT d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak FROM rota_due d
			 WHERE (d.user_id, greatest(d.due_at, d.claim_until)) BETWEEN (p.user_id, '-infinity') AND (p.user_id, $2)
			   AND d.claim_until IS NOT NULL
			 ORDER BY d.due_at, d.work_key LIMIT $4)
		) v ORDER BY v.due_at, v.work_key LIMIT $4
	) e
), held AS (
	UPDATE rota_users u SET held_until = $5
	WHERE $5::timestamptz IS NOT NULL AND u.user_id IN (SELECT page.user_id FROM page)
)
SELECT * FROM (
	SELECT false AS next, page.* FROM page
	UNION ALL
	(SELECT true, NULL, NULL, n.turn, NULL, NULL, NULL, NULL, NULL FROM rota_users n
	 WHERE n.group_name = $1 AND n.turn <= $2 AND (n.held_until IS NULL OR n.held_until <= $2)
	   AND (n.turn, n.user_id) > (
		coalesce((SELECT p.turn FROM picked p ORDER BY p.turn DESC, p.user_id DESC LIMIT 1), '-infinity'),
		coalesce((SELECT p.user_id FROM picked p ORDER BY p.turn DESC, p.user_id DESC LIMIT 1), ''))
	 ORDER BY n.group_name, n.turn, n.user_id LIMIT 1)
) r ORDER BY r.next, r.turn, r.user_id, r.due_at, r.work_key`

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
	var heldUntil *time.Time
	if q.Hold > 0 {
		h := ceilMicro(q.Now.Add(q.Hold))
		heldUntil = &h
	}
	var page duework.ReadyPage
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlReady, q.Group, q.Now, q.Users, q.PerUser+1, heldUntil)
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
				next     bool
				user     *string
				served   *time.Time
				turn     time.Time
				e        duework.Entry
				last     *time.Time
				streak   *int64
				workKey  *string
				tier     *string
				dueAt    *time.Time
				userName string
			)
			if err := rows.Scan(&next, &user, &served, &turn, &workKey, &tier, &dueAt, &last, &streak); err != nil {
				return err
			}
			if next {
				page.Next = turn
				continue
			}
			userName = *user
			e = duework.Entry{UserID: userName, WorkKey: *workKey, Tier: *tier, DueAt: *dueAt, LastRunAt: fromTS(last), MissStreak: int(*streak)}
			n := len(page.Heads)
			if n == 0 || page.Heads[n-1].UserID != userName {
				page.Heads = append(page.Heads, duework.Head{UserID: userName, LastServed: fromTS(served), Turn: turn})
				n++
			}
			h := &page.Heads[n-1]
			if len(h.Due) == q.PerUser {
				h.More = true
				continue
			}
			h.Due = append(h.Due, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return duework.ReadyPage{}, interpret(ctx, "Index.Ready", err)
	}
	return page, nil
}

// Route moves each named user to its group; the last route of a user given twice wins.
// Users the index does not store (and IDs no user could have) are ignored. A user keeps its
// Turn and hold. One statement, which locks the users' rows in UserID order.
func (x *Index) Route(ctx context.Context, routes []duework.Route) error {
	for i, r := range routes {
		if err := duework.ValidateName("Group", r.Group); err != nil {
			return fmt.Errorf("routes[%d]: %w", i, err)
		}
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
// Turns stay as they were. One statement, which locks the users' rows in UserID order.
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
