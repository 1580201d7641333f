package bridge

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
)

// Pushback is the error a [Pipeline] returns when the tenant's upstream asks it to stop —
// an HTTP 429 or 503 with Retry-After, an exhausted quota — so that the whole tenant
// backs off, not only the source that ran:
//
//	if resp.StatusCode == http.StatusTooManyRequests {
//		return bridge.Result{}, &bridge.Pushback{After: retryAfter(resp), Reason: "upstream-429", Err: err}
//	}
//
// On a run whose error wraps a *Pushback (errors.As), the Worker pauses the tenant in the
// index (Index.Pause) until the run's end plus After, so no dispatcher of the fleet
// claims its entries before then; completes the entry with DueAt at the pause's end and
// both its streaks unchanged ([StatusPaused]); and hands back unstarted the tenant's items
// it holds that have not started ([StatusReleased]). It records the pause before it
// frees the run's worker, so no item of the tenant starts on that Worker after the
// pushback. A Pushback whose After is not positive, or whose Reason is not a valid name,
// is a plain error: the source is retried after the Bridge's Retry policy.
//
// Return a Pushback only for what the tenant's upstream says about the tenant: a source
// that is broken or gone returns a plain error, and backs off alone.
type Pushback struct {
	// After is how long the tenant's upstream asked to be left alone (Retry-After).
	After time.Duration
	// Reason names the pushback in logs, metrics and the operator's page, such as
	// "upstream-429"; it is stored with the pause, so it must be a valid name (no
	// control characters, at most 256 bytes).
	Reason string
	// Err is the upstream's error: it is logged, never stored.
	Err error
}

// Error describes the pushback.
func (p *Pushback) Error() string {
	if p.Err == nil {
		return fmt.Sprintf("bridge: pushback %q for %v", p.Reason, p.After)
	}
	return fmt.Sprintf("bridge: pushback %q for %v: %v", p.Reason, p.After, p.Err)
}

// Unwrap returns the upstream's error.
func (p *Pushback) Unwrap() error { return p.Err }

// valid reports whether p pauses its tenant; otherwise it is a plain error.
func (p *Pushback) valid() bool { return p.After > 0 && vocab.ValidName(p.Reason) }
