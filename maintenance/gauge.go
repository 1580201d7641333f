package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Posture is the one-word health of the maintenance chain.
type Posture int

const (
	// PostureUnknown: the state could not be read (the zero Gauge).
	PostureUnknown Posture = iota
	// PostureHealthy: no waiter has waited longer than DegradeAfter.
	PostureHealthy
	// PostureDegraded: some waiter has waited longer than DegradeAfter — the chain is
	// not draining to idle.
	PostureDegraded
	// PostureDisabled: the scheduler has no tasks, or (ReadGauge) the store holds no
	// task's state — maintenance is off in this deployment.
	PostureDisabled
)

// String returns "unknown", "healthy", "degraded" or "disabled".
func (p Posture) String() string {
	switch p {
	case PostureUnknown:
		return "unknown"
	case PostureHealthy:
		return "healthy"
	case PostureDegraded:
		return "degraded"
	case PostureDisabled:
		return "disabled"
	default:
		return fmt.Sprintf("Posture(%d)", int(p))
	}
}

// Waiter is a task in a deferral streak.
type Waiter struct {
	// Task is the waiting task's name.
	Task string
	// Since is the start of its streak and Wait how long it has lasted at the gauge's
	// instant.
	Since time.Time
	Wait  time.Duration
	// Reason and Blocker are the latest deferral's.
	Reason  Reason
	Blocker string
}

// Gauge is the stall gauge: computed from durable state (the StateStore and the Lease)
// at every poll, so a stall survives a restart and is visible.
type Gauge struct {
	// At is the instant the gauge describes.
	At time.Time
	// Posture sums it up.
	Posture Posture
	// Holder holds the lease ("" when free), since HeldFor, running HolderTask (the
	// heavy task whose running state carries the grant's token, "" if none is known).
	Holder     string
	HolderTask string
	HeldFor    time.Duration
	// Waiters are every task in a deferral streak, longest wait first (then by name),
	// including tasks of other schedulers sharing the store.
	Waiters []Waiter
	// ChainDepth is the length of the longest chain of waiters each blocked by the next
	// (a rollup waits on a compaction, which waits on the lease…); 0 without waiters.
	ChainDepth int
}

// longestWait returns the longest current wait, 0 without waiters.
func (g Gauge) longestWait() time.Duration {
	if len(g.Waiters) == 0 {
		return 0
	}
	return g.Waiters[0].Wait
}

// ReadGauge computes the stall gauge at now from store and lease alone, as every poll
// computes it, for a process that runs no Scheduler: an operator page, a health check.
// It needs no task list: every TaskState carries its Class and Rank. lease may be nil;
// the holder is then the one whose heavy run's claim counts in the store, held since
// that run started. degradeAfter 0 means DefaultDegradeAfter. The posture reads
// PostureDisabled only when the store holds no state at all. A nil store or a negative
// degradeAfter is ErrInvalid; a failed read returns the error with a Gauge whose posture
// is PostureUnknown.
//
// Cost: one StateStore Load and, with a lease, one Lease Current; O(n log n) in the
// number of tasks.
func ReadGauge(ctx context.Context, store StateStore, lease Lease, now time.Time, degradeAfter time.Duration) (Gauge, error) {
	switch {
	case store == nil:
		return Gauge{At: now}, fmt.Errorf("%w: read gauge: nil StateStore", ErrInvalid)
	case degradeAfter < 0:
		return Gauge{At: now}, fmt.Errorf("%w: read gauge: degradeAfter must not be negative, got %v", ErrInvalid, degradeAfter)
	case degradeAfter == 0:
		degradeAfter = DefaultDegradeAfter
	}
	if err := validTime("gauge: now", now); err != nil {
		return Gauge{At: now}, err
	}
	snap, err := store.Load(ctx)
	if err != nil {
		return Gauge{At: now}, fmt.Errorf("maintenance: gauge: load state: %w", err)
	}
	var cur Grant
	var held bool
	if lease != nil {
		if cur, held, err = lease.Current(ctx, now); err != nil {
			return Gauge{At: now}, fmt.Errorf("maintenance: gauge: read lease: %w", err)
		}
	} else {
		for _, st := range snap.States {
			if st.Class == Heavy && st.runningAt(now, snap.Token) {
				cur, held = Grant{Holder: st.RunningBy, Token: st.RunningToken, AcquiredAt: st.RunningSince, ExpiresAt: st.RunningUntil}, true
			}
		}
	}
	return computeGauge(snap.States, cur, held, now, degradeAfter, len(snap.States) == 0), nil
}

// computeGauge is pure: the gauge of states and the live grant (held false: free) at now.
func computeGauge(states []TaskState, grant Grant, held bool, now time.Time, degradeAfter time.Duration, disabled bool) Gauge {
	g := Gauge{At: now, Posture: PostureHealthy}
	if disabled {
		g.Posture = PostureDisabled
	}
	if held {
		g.Holder = grant.Holder
		g.HeldFor = now.Sub(grant.AcquiredAt)
		for _, s := range states {
			if s.Running && s.Class == Heavy && s.RunningToken == grant.Token {
				g.HolderTask = s.Name
			}
		}
	}
	blockedBy := make(map[string]string)
	for _, s := range states {
		if !s.waiting() {
			continue
		}
		w := Waiter{Task: s.Name, Since: s.DeferredSince, Wait: now.Sub(s.DeferredSince),
			Reason: s.DeferReason, Blocker: s.DeferBlocker}
		g.Waiters = append(g.Waiters, w)
		blockedBy[s.Name] = s.DeferBlocker
		if w.Wait > degradeAfter && !disabled {
			g.Posture = PostureDegraded
		}
	}
	slices.SortFunc(g.Waiters, func(a, b Waiter) int {
		if a.Wait != b.Wait {
			if a.Wait > b.Wait {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Task, b.Task)
	})
	for _, w := range g.Waiters {
		depth, seen := 0, map[string]bool{}
		for name := w.Task; name != "" && !seen[name]; {
			b, ok := blockedBy[name]
			if !ok {
				break
			}
			seen[name] = true
			depth++
			name = b
		}
		g.ChainDepth = max(g.ChainDepth, depth)
	}
	return g
}
