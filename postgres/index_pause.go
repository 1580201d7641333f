package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// pauseKept is Pause's rule ($2 until), over the stored row u: the stored pause stays when
// it counts and ends after until.
const pauseKept = `(u.paused_until > $2 AND u.paused_until > coalesce(u.last_served, '-infinity'))`

// pauseNew is the pause Pause leaves: the stored one when pauseKept, else until while it
// counts (after LastServed), else none.
var pauseNew = `CASE WHEN ` + pauseKept + ` THEN u.paused_until WHEN $2 > coalesce(u.last_served, '-infinity') THEN $2::timestamptz END`

// sqlPause is Pause, one statement ($1 the user, $2 until, $3 the reason): it stores a user
// it does not know yet, paused, and otherwise keeps the later of the stored pause and
// until, with the later's reason (the new one on a tie), and sets turn from the stored
// parts of ReadyAt, which are exact under the row's lock.
var sqlPause = `INSERT INTO rota_users AS u (user_id, paused_until, pause_reason) VALUES ($1, $2, $3)
	ON CONFLICT (user_id) DO UPDATE SET paused_until = ` + pauseNew + `,
		pause_reason = CASE WHEN ` + pauseKept + ` THEN u.pause_reason WHEN $2 > coalesce(u.last_served, '-infinity') THEN $3 ELSE '' END,
		turn = ` + turnOf("u.free_at", "u.claim_end_at", "u.slot_at", "u.rate_mark", "u.every", "u.burst", "u.pass", pauseNew, "u.last_served")

// sqlResume is Resume, one statement ($1 the user): it drops the user's pause, if it has
// one, and sets turn without it.
var sqlResume = `UPDATE rota_users u SET paused_until = NULL, pause_reason = '',
		turn = ` + turnOf("u.free_at", "u.claim_end_at", "u.slot_at", "u.rate_mark", "u.every", "u.burst", "u.pass", "NULL::timestamptz", "u.last_served") + `
	WHERE u.user_id = $1 AND u.paused_until IS NOT NULL`

// sqlPaused is Paused's read ($1 after, $2 now, $3 limit): the users with a stored pause
// from after on, by rota_users_paused, keeping those paused at now.
const sqlPaused = `SELECT u.user_id, u.pause_reason, u.paused_until FROM rota_users u
	WHERE u.paused_until IS NOT NULL AND u.user_id > $1
	  AND u.paused_until > $2 AND u.paused_until > coalesce(u.last_served, '-infinity')
	ORDER BY u.user_id LIMIT $3`

// Pause keeps tc's user from being served before until, on every dispatcher sharing the
// database: its stored pause becomes the later of the stored one and until, with the
// later's reason, and its Turn at least until while the pause counts (see duework.Index),
// so Ready passes it at no cost and Claim skips its keys. A user the index does not store
// yet is stored, unrouted and with zero limits. Stored times have microsecond precision:
// until is rounded up to the next microsecond (and the end of year 9999 down to its last
// one). One statement, which locks the user's row alone.
func (x *Index) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := (duework.UserPause{UserID: tc.UserID(), Reason: reason, Until: until}).Validate(); err != nil {
		return err
	}
	stored := ceilMicro(until)
	if last := vocab.MaxTime.Truncate(time.Microsecond); stored.After(last) {
		stored = last // the last microsecond of year 9999 is as good as its last nanosecond
	}
	return x.exec(ctx, "Index.Pause", sqlPlanSettings, write{sqlPause, []any{tc.UserID(), stored, reason}})
}

// Resume ends tc's user's pause at once; a user without one, or not stored, is left as it
// is. One statement, which locks the user's row alone.
func (x *Index) Resume(ctx context.Context, tc tenancy.Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	return x.exec(ctx, "Index.Resume", sqlPlanSettings, write{sqlResume, []any{tc.UserID()}})
}

// Paused returns, in UserID order, up to limit of the users paused at now whose IDs sort
// after after, with their pauses. One query, which reads rota_users_paused from after on:
// it costs what it returns plus the stored pauses it passes that have ended at now.
func (x *Index) Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error) {
	if after != "" {
		if err := vocab.Name(duework.ErrInvalid, "after", after); err != nil {
			return nil, err
		}
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	var out []duework.UserPause
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlPaused, after, now, limit)
	err := x.sendBatch(ctx, b, 1, func(rows pgx.Rows) error {
		var p duework.UserPause
		err := rows.Scan(&p.UserID, &p.Reason, &p.Until)
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Paused", err)
	}
	return out, nil
}
