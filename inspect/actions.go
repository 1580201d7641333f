package inspect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// The outcomes of the actions, in their JSON and in the tenant page's ?done=.
const (
	outcomeScheduled  = "scheduled"   // due-now: the entry is due now
	outcomeAlreadyDue = "already_due" // due-now: nothing written, the entry is (about to be) due
	outcomeClaimed    = "claimed"     // due-now: refused, the entry is claimed
	outcomeRerouted   = "rerouted"    // reroute: done
	outcomeNotFound   = "not_found"   // the tenant or entry does not exist
	outcomeInvalid    = "invalid"     // a malformed tenant ID or work key
	outcomeFailed     = "failed"      // the Index or the Dispatcher failed
)

// dueNow makes userID's entry workKey due at now, keeping the rest of it (tier, streak,
// last run), unless it is claimed at now (409) or due by now plus the Dispatcher's
// MaxClockSkew, which it leaves as it is: no dispatcher whose clock is within that skew can
// claim an entry due later before this write lands, so the write never ends a claim and a
// run never overlaps itself. It reads the entry with one Entries and writes it with one
// Schedule.
func (i *Inspector) dueNow(ctx context.Context, now time.Time, userID, workKey string) (int, actionJSON) {
	res := actionJSON{Action: "due-now", UserID: userID, WorkKey: workKey}
	tc, err := tenancy.NewContext(userID)
	if err == nil {
		err = vocab.Name(duework.ErrInvalid, "WorkKey", workKey)
	}
	if err != nil {
		return refused(res, http.StatusBadRequest, outcomeInvalid, err)
	}
	es, err := i.entry(ctx, userID, workKey)
	switch {
	case errors.Is(err, duework.ErrNotFound):
		return refused(res, http.StatusNotFound, outcomeNotFound, fmt.Errorf("tenant %q has no entry %q", userID, workKey))
	case err != nil:
		return i.failed(ctx, res, err)
	}
	if es.ClaimedUntil.After(now) {
		res.ClaimedUntil = utc(es.ClaimedUntil)
		return refused(res, http.StatusConflict, outcomeClaimed,
			fmt.Errorf("entry %q is claimed until %s: it runs now; try again once its claim ends", workKey, res.ClaimedUntil.Format(time.RFC3339)))
	}
	if skew := i.d.Config().MaxClockSkew; !es.Entry.DueAt.After(now.Add(skew)) {
		e := i.entryOf(es, now)
		res.Entry, res.Outcome = &e, outcomeAlreadyDue
		res.Message = fmt.Sprintf("entry %q is already due, since %s: nothing to do; it runs at the tenant's next turn in its lane", workKey, e.DueAt.Format(time.RFC3339))
		if es.Entry.DueAt.After(now) {
			res.Message = fmt.Sprintf("entry %q comes due at %s, within the dispatchers' clock skew (%v): nothing to do", workKey, e.DueAt.Format(time.RFC3339), skew)
		}
		return http.StatusOK, res
	}
	next := es.Entry
	next.DueAt = now
	if err := i.idx.Schedule(ctx, tc, next); err != nil {
		return i.failed(ctx, res, err)
	}
	e := i.entryOf(duework.EntryState{Entry: next}, now)
	res.Entry, res.Outcome = &e, outcomeScheduled
	res.Message = fmt.Sprintf("entry %q is due now (it was due at %s), miss streak %d kept", workKey, utc(es.Entry.DueAt).Format(time.RFC3339), next.MissStreak)
	return http.StatusOK, res
}

// reroute resolves userID's lane and limits again through the Dispatcher and reads where
// it stands after: one User, one Dispatcher.Reroute, one User.
func (i *Inspector) reroute(ctx context.Context, now time.Time, userID string) (int, actionJSON) {
	res := actionJSON{Action: "reroute", UserID: userID}
	if err := tenancy.ValidateID("tenant ID", userID); err != nil {
		return refused(res, http.StatusBadRequest, outcomeInvalid, err)
	}
	before, status, out := i.actionUser(ctx, now, res)
	if status != 0 {
		return status, out
	}
	if err := i.d.Reroute(ctx, userID); err != nil {
		return i.failed(ctx, res, err)
	}
	after, err := i.idx.User(ctx, userID, now)
	if err != nil {
		return i.failed(ctx, res, err)
	}
	l := limitsOf(after.Limits)
	res.Outcome, res.Group, res.Limits = outcomeRerouted, after.Group, &l
	res.Message = fmt.Sprintf("tenant %q re-routed: group %q, now %q", userID, before.Group, after.Group)
	return http.StatusOK, res
}

// refused is res refused with status and err, whose text is the Inspector's own.
func refused(res actionJSON, status int, outcome string, err error) (int, actionJSON) {
	res.Outcome, res.Error, res.Message = outcome, err.Error(), err.Error()
	return status, res
}

// failed is res failed with 500 because a store did: err is withheld (see withhold).
func (i *Inspector) failed(ctx context.Context, res actionJSON, err error) (int, actionJSON) {
	text := i.withhold(ctx, slog.LevelError, res.Action, err)
	res.Outcome, res.Error, res.Message = outcomeFailed, text, text
	return http.StatusInternalServerError, res
}

// logAction writes one line for an action: Info when it was carried out or had nothing to
// do, Warn when it was refused or failed.
func (i *Inspector) logAction(r *http.Request, status int, res actionJSON) {
	level := slog.LevelInfo
	attrs := []slog.Attr{slog.String("action", res.Action), slog.String("user", res.UserID), slog.String("outcome", res.Outcome),
		slog.Int("status", status), slog.String("remote", r.RemoteAddr)}
	if res.WorkKey != "" {
		attrs = append(attrs, slog.String("work_key", res.WorkKey))
	}
	if !res.PausedUntil.IsZero() {
		attrs = append(attrs, slog.Time("paused_until", res.PausedUntil), slog.String("pause_reason", res.PauseReason))
	}
	if res.Error != "" {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", res.Error))
	}
	i.log.LogAttrs(context.WithoutCancel(r.Context()), level, "inspect: action", attrs...)
}
