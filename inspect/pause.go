package inspect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// The bounds of the pages' paused lists and of the pause action.
const (
	// maxPausedShown is how many paused tenants the overview lists; /paused pages on.
	maxPausedShown = 20
	// maxFailingShown is how many failing sources the overview lists.
	maxFailingShown = 50
	// operatorReason is the reason of the pauses the pause action writes.
	operatorReason = "operator"
	// minPause and maxPause bound the pause action's duration.
	minPause = time.Second
	maxPause = 30 * 24 * time.Hour
)

// The outcomes of the pause and resume actions.
const (
	outcomePaused        = "paused"         // pause: the tenant is paused as asked
	outcomeAlreadyPaused = "already_paused" // pause: a pause that ends later stands
	outcomeResumed       = "resumed"        // resume: the tenant's pause ended
	outcomeNotPaused     = "not_paused"     // resume: nothing to do
)

// paused reads the users paused at now after the user ID after, with one Index.Paused of
// limit+1: at most limit of them, and next, the after of the next page ("" when none).
func (i *Inspector) paused(ctx context.Context, now time.Time, after string, limit int) ([]pausedJSON, string, error) {
	ps, err := i.idx.Paused(ctx, now, after, limit+1)
	if err != nil {
		return []pausedJSON{}, "", err
	}
	next := ""
	if len(ps) > limit {
		ps = ps[:limit]
		next = ps[limit-1].UserID
	}
	out := make([]pausedJSON, 0, len(ps))
	for _, p := range ps {
		out = append(out, pausedJSON{UserID: p.UserID, Reason: p.Reason, Until: utc(p.Until), LeftSeconds: since(p.Until, now)})
	}
	return out, next, nil
}

// servePaused serves the paused tenants' list, GET /paused: one Index.Paused of limit+1.
func (i *Inspector) servePaused(r *http.Request, now time.Time) (page, error) {
	limit, err := limitParam(r)
	if err != nil {
		return page{}, err
	}
	after := r.URL.Query().Get("after")
	if after != "" {
		if err := tenancy.ValidateID("after", after); err != nil {
			return page{}, badRequest("after must be a tenant ID: %v", err)
		}
	}
	v := pausedViewJSON{Now: utc(now), After: after, Actions: i.actions}
	if v.Paused, v.Next, err = i.paused(r.Context(), now, after, limit); err != nil {
		return page{}, &storeError{"reading the paused tenants", err}
	}
	return page{name: "paused", title: "paused tenants", view: v}, nil
}

// parsePauseFor reads the pause action's duration: a Go duration ("90m", "1h30m") or a
// number of seconds ("5400"), from minPause to maxPause.
func parsePauseFor(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	bounds := fmt.Sprintf("between %v and %v (%d days)", minPause, maxPause, maxPause/(24*time.Hour))
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		switch {
		case s == "":
			return 0, fmt.Errorf("give for, how long to pause: a duration such as 90m or 2h, or a number of seconds, %s", bounds)
		case ferr != nil || math.IsNaN(f):
			return 0, fmt.Errorf("for must be a duration such as 90m or 2h, or a number of seconds, got %q", s)
		case f < minPause.Seconds() || f > maxPause.Seconds(): // ±Inf too
			return 0, fmt.Errorf("for must be %s, got %q", bounds, s)
		}
		d = time.Duration(math.Round(f * float64(time.Second)))
	}
	if d < minPause || d > maxPause {
		return 0, fmt.Errorf("for must be %s, got %q", bounds, s)
	}
	return d, nil
}

// pause pauses userID from now for the duration forText says, with the reason "operator",
// and reads back the pause that stands: one User (a tenant the index does not store is
// not_found, so a mistyped ID stores nothing), one Index.Pause, one User. A pause that
// ends later stands as it is (already_paused): Index.Pause never shortens one. The pause's
// end is now plus the duration, to the second below.
func (i *Inspector) pause(ctx context.Context, now time.Time, userID, forText string) (int, actionJSON) {
	res := actionJSON{Action: "pause", UserID: userID}
	tc, err := tenancy.NewContext(userID)
	if err != nil {
		return refused(res, http.StatusBadRequest, outcomeInvalid, err)
	}
	d, err := parsePauseFor(forText)
	if err != nil {
		return refused(res, http.StatusBadRequest, outcomeInvalid, err)
	}
	if _, status, out := i.actionUser(ctx, now, res); status != 0 {
		return status, out
	}
	until := now.Add(d).Truncate(time.Second)
	if err := i.idx.Pause(ctx, tc, until, operatorReason); err != nil {
		return i.failed(ctx, res, err)
	}
	after, err := i.idx.User(ctx, userID, now)
	if err != nil {
		return i.failed(ctx, res, err)
	}
	res.PausedUntil, res.PauseReason = utc(after.PausedUntil), after.PauseReason
	if after.PausedUntil.After(until) {
		res.Outcome = outcomeAlreadyPaused
		res.Message = fmt.Sprintf("tenant %q stays paused until %s (reason %q), later than the %v asked for: a pause is never shortened; resume it first to pause it for less",
			userID, res.PausedUntil.Format(time.RFC3339), after.PauseReason, d)
		return http.StatusOK, res
	}
	res.Outcome = outcomePaused
	res.Message = fmt.Sprintf("tenant %q is paused until %s: no dispatcher serves it before then; runs under way run on", userID, until.UTC().Format(time.RFC3339))
	return http.StatusOK, res
}

// resume ends userID's pause: one User, one Index.Resume. It resumes whatever paused the
// tenant, a pushback or an operator; an entry whose run was pushed back stays due at the
// pause's end (due-now runs it sooner).
func (i *Inspector) resume(ctx context.Context, now time.Time, userID string) (int, actionJSON) {
	res := actionJSON{Action: "resume", UserID: userID}
	tc, err := tenancy.NewContext(userID)
	if err != nil {
		return refused(res, http.StatusBadRequest, outcomeInvalid, err)
	}
	before, status, out := i.actionUser(ctx, now, res)
	if status != 0 {
		return status, out
	}
	if err := i.idx.Resume(ctx, tc); err != nil {
		return i.failed(ctx, res, err)
	}
	if before.PausedUntil.IsZero() {
		res.Outcome, res.Message = outcomeNotPaused, fmt.Sprintf("tenant %q was not paused: nothing to resume", userID)
		return http.StatusOK, res
	}
	res.Outcome = outcomeResumed
	res.Message = fmt.Sprintf("tenant %q resumed: its pause until %s (reason %q) ended, and it is served at its next turn in its lane; an entry whose run was pushed back stays due at the pause's end unless made due now",
		userID, utc(before.PausedUntil).Format(time.RFC3339), before.PauseReason)
	return http.StatusOK, res
}

// actionUser reads the tenant of an action at now. When the index does not store it
// (404), or the read fails (500), status is that answer's, with out; otherwise status is 0.
func (i *Inspector) actionUser(ctx context.Context, now time.Time, res actionJSON) (st duework.UserState, status int, out actionJSON) {
	st, err := i.idx.User(ctx, res.UserID, now)
	switch {
	case errors.Is(err, duework.ErrNotFound):
		status, out = refused(res, http.StatusNotFound, outcomeNotFound, fmt.Errorf("the index has no tenant %q", res.UserID))
	case err != nil:
		status, out = i.failed(ctx, res, err)
	}
	return st, status, out
}
