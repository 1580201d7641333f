package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// validUserID checks a user ID for the operator's reads, wrapping duework.ErrInvalid.
func validUserID(id string) error {
	if err := tenancy.ValidateID("UserID", id); err != nil {
		return fmt.Errorf("%w: %w", duework.ErrInvalid, err)
	}
	return nil
}

// sqlUser is User's read ($1 the user, $2 now): the user's row by primary key and, when
// it has claims, its in-flight count.
var sqlUser = `SELECT u.group_name, u.weight, u.max_in_flight, u.every, u.burst, u.last_served, u.turn,
		CASE WHEN u.held_until > $2 THEN u.held_until END,
		CASE WHEN u.claim_end_at IS NULL THEN 0 ELSE ` + inFlight("u.user_id", "$2::timestamptz") + ` END,
		CASE WHEN ` + pausedAt("u.paused_until", "u.last_served", "$2::timestamptz") + ` THEN u.paused_until END,
		CASE WHEN ` + pausedAt("u.paused_until", "u.last_served", "$2::timestamptz") + ` THEN u.pause_reason ELSE '' END
	FROM rota_users u WHERE u.user_id = $1`

// User returns userID's place in its queue at now: its group, limits, LastServed, Turn
// (zero without entries), the end of its hold when it is after now, its in-flight count,
// and its pause when it is paused at now. A user the index does not store is duework.ErrNotFound. It reads the user's row
// by primary key, and one index entry per claim in flight, in one round trip.
func (x *Index) User(ctx context.Context, userID string, now time.Time) (duework.UserState, error) {
	if err := validUserID(userID); err != nil {
		return duework.UserState{}, err
	}
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return duework.UserState{}, err
	}
	var (
		st                      duework.UserState
		weight, m, burst        int32
		every, inFlight         int64
		served, turn, heldUntil *time.Time
		pausedUntil             *time.Time
	)
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings + sqlSortOff)
	b.Queue(sqlUser, userID, now)
	found := false
	err := x.sendBatch(ctx, b, 1, func(rows pgx.Rows) error {
		found = true
		return rows.Scan(&st.Group, &weight, &m, &every, &burst, &served, &turn, &heldUntil, &inFlight, &pausedUntil, &st.PauseReason)
	})
	if err != nil {
		return duework.UserState{}, interpret(ctx, "Index.User", err)
	}
	if !found {
		return duework.UserState{}, fmt.Errorf("postgres: Index.User %q: %w", userID, duework.ErrNotFound)
	}
	st.Limits = duework.Limits{Weight: int(weight), MaxInFlight: int(m), Every: time.Duration(every), Burst: int(burst)}
	st.LastServed, st.Turn, st.HeldUntil, st.InFlight = fromTS(served), fromTS(turn), fromTS(heldUntil), int(inFlight)
	st.PausedUntil = fromTS(pausedUntil)
	return st, nil
}

// sqlEntries is Entries' read ($1 the user, $2 after, $3 limit): a range of rota_due's
// primary key, from (user, after) on.
const sqlEntries = `SELECT ` + entryColumns + `, d.claim_until FROM rota_due d
	WHERE (d.user_id, d.work_key) > ($1, $2) AND d.user_id = $1
	ORDER BY d.user_id, d.work_key LIMIT $3`

// Entries returns up to limit of userID's entries whose WorkKey sorts after after ("" for
// the first), in WorkKey order (bytewise), each with the Until of its current claim, ended
// or not (zero when it has none). A user the index does not store has none. It reads
// limit rows of rota_due's primary key, in one round trip, whatever the user's backlog.
func (x *Index) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	if err := validUserID(userID); err != nil {
		return nil, err
	}
	if after != "" {
		if err := vocab.Name(duework.ErrInvalid, "WorkKey", after); err != nil {
			return nil, fmt.Errorf("after: %w", err)
		}
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	var out []duework.EntryState
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlEntries, userID, after, limit)
	err := x.sendBatch(ctx, b, 1, func(rows pgx.Rows) error {
		var until *time.Time
		e, err := scanEntry(rows, &until)
		out = append(out, duework.EntryState{Entry: e, ClaimedUntil: fromTS(until)})
		return err
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Entries", err)
	}
	return out, nil
}
