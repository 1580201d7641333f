package maintenance

import (
	"context"
	"errors"
	"fmt"
	"math"
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

func (o Outcome) valid() bool {
	return o == OutcomeNone || o == OutcomeSucceeded || o == OutcomeFailed || o == OutcomeCancelled
}

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
	DeferReason   Reason
	DeferBlocker  string
}

// Waiting reports whether the task is in a deferral streak.
func (s TaskState) Waiting() bool { return !s.DeferredSince.IsZero() }

// Validate reports, each wrapping ErrInvalid, every field of s that a StateStore refuses:
// a Name ValidateName refuses; an unknown Class, Rank or LastOutcome; a time ValidateTime
// refuses; RunningBy or DeferBlocker neither empty nor a valid name; a DeferReason or
// LastError that is not valid UTF-8 or holds NUL; a RunningToken above math.MaxInt64; a
// negative Deferrals. StateStore adapters call it before they send a state.
func (s TaskState) Validate() error {
	errs := []error{ValidateName("Name", s.Name)}
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if !s.Class.valid() {
		bad("Class must be Heavy or OffLease, got %d", int(s.Class))
	}
	if !s.Rank.valid() {
		bad("Rank must be RankOrdinary, RankBootstrap or RankDataSafety, got %d", int(s.Rank))
	}
	if !s.LastOutcome.valid() {
		bad("LastOutcome must be an Outcome constant, got %s", quote(string(s.LastOutcome)))
	}
	if s.RunningToken > math.MaxInt64 {
		bad("RunningToken must be at most %d, got %d", int64(math.MaxInt64), s.RunningToken)
	}
	if s.Deferrals < 0 {
		bad("Deferrals must not be negative, got %d", s.Deferrals)
	}
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"LastRunAt", s.LastRunAt}, {"RunningSince", s.RunningSince}, {"DeferredSince", s.DeferredSince}, {"DeferredAt", s.DeferredAt}} {
		errs = append(errs, ValidateTime(f.name, f.t))
	}
	for _, f := range []struct{ name, v string }{{"RunningBy", s.RunningBy}, {"DeferBlocker", s.DeferBlocker}} {
		if f.v != "" {
			errs = append(errs, ValidateName(f.name, f.v))
		}
	}
	errs = append(errs, validateText("DeferReason", string(s.DeferReason), true), validateText("LastError", s.LastError, false))
	return errors.Join(errs...)
}

// Snapshot is everything a StateStore holds.
type Snapshot struct {
	// Token is the store's fence: the highest token it has seen (0 when none).
	Token uint64
	// States holds every task's state, ordered by Name.
	States []TaskState
}

// StateStore keeps TaskStates durably, fenced by the lease token.
//
// Fencing: every Save carries a token, and the store refuses with ErrStaleToken, writing
// nothing, a Save whose token is below its fence: the highest token of a Save that
// succeeded, or the latest token the lease that fences the store has granted, whichever
// is higher. So once a new grant exists, the holder it replaced can write nothing, even
// before the new holder's first write. A scheduler writes the state of the heavy task it
// runs with the token of the grant it runs under; other writes carry the newest token it
// has seen, which is refused only when a newer grant exists.
//
// Validity: a Save whose token is above math.MaxInt64, or with a state that
// TaskState.Validate refuses, wraps ErrInvalid and writes nothing, so every store keeps
// the same states.
//
// Ownership: Load returns new slices that belong to the caller; Save keeps neither the
// slice nor the states it is given. Times round-trip with microsecond precision and
// compare with time.Time.Equal (the location may change).
//
// Implementations are safe for concurrent use by several schedulers (and machines);
// maintenancetest.RunStateStore checks all of this.
type StateStore interface {
	// Load returns the fence and every task's state, ordered by Name.
	Load(ctx context.Context) (Snapshot, error)
	// Save inserts or replaces (by Name) each of states, all or none, fenced by token:
	// ErrStaleToken when token is below the fence, else the fence rises to token. A
	// Save that names one task twice keeps the later state.
	Save(ctx context.Context, token uint64, states ...TaskState) error
}

// checkSave checks a Save's token and states.
func checkSave(token uint64, states []TaskState) error {
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: save: token must be at most %d, got %d", ErrInvalid, int64(math.MaxInt64), token)
	}
	for i, s := range states {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("save: states[%d]: %w", i, err)
		}
	}
	return nil
}

// MemoryStateStore is an in-memory StateStore for one process. Its state lives in the
// value, so a new Scheduler over the same store — a "restart" — sees everything earlier
// schedulers wrote. Safe for concurrent use.
type MemoryStateStore struct {
	mu     sync.Mutex
	lease  *MemoryLease // fences the store; nil: only its own saves do
	token  uint64
	states map[string]TaskState
}

var _ StateStore = (*MemoryStateStore)(nil)

// NewMemoryStateStore returns an empty in-memory store, fenced only by its own saves until
// FenceWith ties it to a lease.
func NewMemoryStateStore() *MemoryStateStore {
	return &MemoryStateStore{states: make(map[string]TaskState)}
}

// FenceWith fences m with l as well: a Save below the latest token l has granted is
// refused from the moment of the grant. Schedulers that share a MemoryLease and a
// MemoryStateStore want it; NewScheduler does it for the store it makes itself. Call it
// before m is shared.
func (m *MemoryStateStore) FenceWith(l *MemoryLease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lease = l
}

// fence returns the store's fence; m.mu is held.
func (m *MemoryStateStore) fence() uint64 {
	if m.lease == nil {
		return m.token
	}
	return max(m.token, m.lease.token())
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
	return Snapshot{Token: m.fence(), States: out}, nil
}

// Save implements StateStore.
func (m *MemoryStateStore) Save(ctx context.Context, token uint64, states ...TaskState) error {
	if err := checkSave(token, states); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fence := m.fence(); token < fence {
		return fmt.Errorf("%w: save: token %d below fence %d", ErrStaleToken, token, fence)
	}
	m.token = token
	for _, s := range states {
		m.states[s.Name] = s
	}
	return nil
}
