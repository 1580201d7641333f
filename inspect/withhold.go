package inspect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// storeError is an error a store — the Index, the StateStore, the Dispatcher — returned
// to one of the Inspector's own reads or writes. Its text may carry a database's words
// (a host name, a role, a statement), so no page and no JSON answer shows it: they say
// what failed and give a reference to the log line that holds it (see withhold).
type storeError struct {
	what string // what failed, as the page says it: "reading the tenant"
	err  error
}

func (e *storeError) Error() string { return e.what + ": " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// withhold logs err at level with a new reference and returns the text a page shows in
// its place: what failed and the reference. Every error text the Inspector keeps from its
// pages is in its log this way, once.
func (i *Inspector) withhold(ctx context.Context, level slog.Level, what string, err error) string {
	return refText(what, i.logWithheld(ctx, level, what, err))
}

// logWithheld logs err at level under a new reference, which it returns.
func (i *Inspector) logWithheld(ctx context.Context, level slog.Level, what string, err error) string {
	ref := newRef()
	i.log.LogAttrs(context.WithoutCancel(ctx), level, "inspect: error withheld from the page",
		slog.String("what", what), slog.String("ref", ref), slog.Any("error", err))
	return ref
}

// refText is what a page shows in place of an error logged under ref: what failed and
// the reference.
func refText(what, ref string) string {
	return fmt.Sprintf("%s failed; the log has the error under ref %s", what, ref)
}

// newRef returns a short random reference that ties a page's message to a log line.
func newRef() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shownReason reports whether an unrouted user's reason is rota's own words, which name
// only the user, its plan and its lane: an unknown lane, a plan the host's table lacks,
// limits that fail validation. Any other error — the host's LaneFor or LimitsFor, a
// panic, a store behind them — is withheld.
func shownReason(err error) bool {
	return errors.Is(err, dispatch.ErrUnknownLane) || errors.Is(err, bridge.ErrUnmappedPlan) ||
		errors.Is(err, duework.ErrInvalid)
}
