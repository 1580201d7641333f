package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Outcome is how a task's last run ended.
type Outcome string

const (
	// OutcomeNone: the task has not finished a run.
	OutcomeNone Outcome = ""
	// OutcomeSucceeded: the RunFunc returned nil.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: the RunFunc returned an error (or panicked).
	OutcomeFailed Outcome = "failed"
	// OutcomeCancelled: the run's context ended first (MaxHold, lost lease, shutdown).
	OutcomeCancelled Outcome = "cancelled"
)

// TaskState is the durable state of one task, kept by a StateStore and shared by every
// scheduler of a fleet that uses that store. The zero value (but for Name) is a task that
// never ran and is not waiting.
type TaskState struct {
	// Name is the task's name, the key of its state.
	Name string
	// Class and Rank are copied from the task by the scheduler that writes the state, so
	// schedulers that do not know the task can still rank its waiter.
	Class Class
	Rank  Rank

	// LastRunAt is when the latest finished run started (zero: never ran). Staleness
	// and the default due rule count from it.
	LastRunAt time.Time
	// LastOutcome and LastError describe the latest finished run.
	LastOutcome Outcome
	LastError   string

	// Running is set while a scheduler runs the task, since RunningSince, on holder
	// RunningBy. For a heavy task RunningToken is the token of the lease grant it runs
	// under, and the flag counts only while that grant is the lease's current one.
	Running      bool
	RunningSince time.Time
	RunningBy    string
	RunningToken uint64

	// DeferredSince is the start of the task's current deferral streak (zero: not a
	// waiter). DeferredAt is the latest poll that deferred it, Deferrals how many polls
	// did in this streak, DeferReason and DeferBlocker the latest reason and blocker.
	DeferredSince time.Time
	DeferredAt    time.Time
	Deferrals     int
	DeferReason   string
	DeferBlocker  string
}

// Waiting reports whether the task is in a deferral streak.
func (s TaskState) Waiting() bool { return !s.DeferredSince.IsZero() }

// Snapshot is everything a StateStore holds.
type Snapshot struct {
	// Token is the highest fencing token the store has seen (0 when none).
	Token uint64
	// States holds every task's state, ordered by Name.
	States []TaskState
}

// StateStore keeps TaskStates durably, fenced by the lease token.
//
// Fencing: every Save carries a token. The store remembers the highest token it has seen
// in a Save that succeeded. A Save whose token is lower than that is refused with
// ErrStaleToken and writes nothing; a Save with an equal or higher token is accepted and
// raises the fence to its token. A scheduler writes the state of the heavy task it runs
// with the token of the lease grant it holds, so a holder whose grant was replaced (it
// stalled past its TTL and another took the lease) cannot overwrite what the new holder
// wrote; other writes carry the newest token the writer has seen (from the Lease or from
// Load), which is never refused unless a newer grant has written since.
//
// Ownership: Load returns new slices that belong to the caller; Save does not keep the
// slice or states it is given. Times round-trip with at least microsecond precision
// and compare with time.Time.Equal (the location may change).
//
// Implementations must be safe for concurrent use by several schedulers (and machines);
// maintenancetest.RunStateStore checks all of this.
type StateStore interface {
	// Load returns the highest token seen and every task's state, ordered by Name.
	Load(ctx context.Context) (Snapshot, error)
	// Save inserts or replaces (by Name) each of states, all or none, fenced by token:
	// ErrStaleToken when token is below the highest seen. A state with an empty Name is
	// ErrInvalid, and a Save that names one task twice keeps the later state.
	Save(ctx context.Context, token uint64, states ...TaskState) error
}

// MemoryStateStore is an in-memory StateStore for one process. Its state lives in the
// value, so a new Scheduler over the same store — a "restart" — sees everything earlier
// schedulers wrote. Safe for concurrent use.
type MemoryStateStore struct {
	mu     sync.Mutex
	token  uint64
	states map[string]TaskState
}

var _ StateStore = (*MemoryStateStore)(nil)

// NewMemoryStateStore returns an empty in-memory store.
func NewMemoryStateStore() *MemoryStateStore {
	return &MemoryStateStore{states: make(map[string]TaskState)}
}

// Load implements StateStore. O(n log n) in the number of tasks.
func (m *MemoryStateStore) Load(ctx context.Context) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TaskState, 0, len(m.states))
	for _, s := range m.states {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b TaskState) int { return strings.Compare(a.Name, b.Name) })
	return Snapshot{Token: m.token, States: out}, nil
}

// Save implements StateStore.
func (m *MemoryStateStore) Save(ctx context.Context, token uint64, states ...TaskState) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, s := range states {
		if s.Name == "" {
			return fmt.Errorf("maintenance: save: states[%d].Name: empty: %w", i, ErrInvalid)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if token < m.token {
		return fmt.Errorf("maintenance: save: token %d below fence %d: %w", token, m.token, ErrStaleToken)
	}
	m.token = token
	for _, s := range states {
		m.states[s.Name] = s
	}
	return nil
}
