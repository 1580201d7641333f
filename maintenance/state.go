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

// The outcomes of a run; the zero Outcome, "", is that of a task that has not finished a
// run.
const (
	// OutcomeSucceeded: the RunFunc returned nil.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: the RunFunc returned an error (or panicked).
	OutcomeFailed Outcome = "failed"
	// OutcomeCancelled: the run's context ended first (MaxHold, lost lease, shutdown).
	OutcomeCancelled Outcome = "cancelled"
)

func (o Outcome) valid() bool {
	return o == "" || o == OutcomeSucceeded || o == OutcomeFailed || o == OutcomeCancelled
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
	// RunningUntil is the run's claim: the flag counts only before it. The scheduler that
	// runs the task moves it forward while the run lasts (see Scheduler.Run), so a flag
	// whose scheduler stopped, or whose outcome could not be written, lapses on its own.
	Running      bool
	RunningSince time.Time
	RunningBy    string
	RunningToken uint64
	RunningUntil time.Time

	// DeferredSince is the start of the task's current deferral streak (zero: not a
	// waiter). DeferredAt is the latest poll that deferred it, Deferrals how many polls
	// did in this streak, DeferReason and DeferBlocker the latest reason and blocker.
	DeferredSince time.Time
	DeferredAt    time.Time
	Deferrals     int
	DeferReason   Reason
	DeferBlocker  string
}

// waiting reports whether the task is in a deferral streak.
func (s TaskState) waiting() bool { return !s.DeferredSince.IsZero() }

// Validate reports, each wrapping ErrInvalid, every field of s that a StateStore refuses:
// a Name that is not a valid name; an unknown Class, Rank or LastOutcome; a time outside
// years 1 to 9999 UTC; RunningBy or DeferBlocker neither empty nor a valid name (see Names
// and times in the package documentation); a DeferReason or
// LastError that is not valid UTF-8 or holds NUL; a RunningToken above math.MaxInt64; a
// negative Deferrals. StateStore adapters call it before they send a state.
func (s TaskState) Validate() error {
	errs := []error{validName("Name", s.Name)}
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if !s.Class.valid() {
		bad("Class must be Heavy or OffLease, got %d", int(s.Class))
	}
	if !s.Rank.valid() {
		bad("Rank must be 0 (ordinary), RankBootstrap or RankDataSafety, got %d", int(s.Rank))
	}
	if !s.LastOutcome.valid() {
		bad("LastOutcome must be \"\" or an Outcome constant, got %s", quote(string(s.LastOutcome)))
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
	}{{"LastRunAt", s.LastRunAt}, {"RunningSince", s.RunningSince}, {"RunningUntil", s.RunningUntil},
		{"DeferredSince", s.DeferredSince}, {"DeferredAt", s.DeferredAt}} {
		errs = append(errs, validTime(f.name, f.t))
	}
	for _, f := range []struct{ name, v string }{{"RunningBy", s.RunningBy}, {"DeferBlocker", s.DeferBlocker}} {
		if f.v != "" {
			errs = append(errs, validName(f.name, f.v))
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

// UpdateFunc computes the writes of a StateStore.Update from the store's fence and the
// current states of the names the Update was given, in their order (a task the store
// holds no state for is the zero TaskState with its Name). It returns the states to
// write, each of one of those names (one written twice keeps the later state), and a
// token to raise the fence to (0, or any token not above the fence, leaves it). An error
// writes nothing; Update returns it.
//
// An UpdateFunc must depend on its arguments alone: a store may call it more than once
// for one Update (an optimistic store calls it again after a conflict) and writes what
// its last call returned. The states slice belongs to the function.
type UpdateFunc func(fence uint64, states []TaskState) (writes []TaskState, raise uint64, err error)

// StateStore keeps TaskStates durably, shared by every scheduler of a fleet.
//
// Update is what the Scheduler writes with: a read-modify-write of a few tasks' states
// that is atomic with respect to every other Update and Save of the store — no write
// takes effect between its read and its write — so that the Scheduler can claim a task
// for one run across the whole fleet (a compare-and-set on the task's running flag and on
// the flags of the tasks it depends on), extend and end that claim, and record the
// deferrals of any scheduler, holder of the lease or not, without losing another's write.
//
// Fencing: the fence is the highest token of a write that succeeded, or the latest
// token the lease that fences the store has granted, whichever is higher. Save carries a
// token and the store refuses with ErrStaleToken, writing nothing, a Save whose token is
// below the fence: once a new grant exists, the holder it replaced can Save nothing,
// even before the new holder's first write. Update hands the fence to its UpdateFunc;
// the Scheduler's UpdateFuncs refuse every write of a heavy run whose grant was
// replaced, with ErrStaleToken, and a heavy run's claim raises the fence to its grant's
// token.
//
// Validity: a Save whose token is above math.MaxInt64, or with a state that
// TaskState.Validate refuses, wraps ErrInvalid and writes nothing; so does an Update
// given names that are not valid names or that repeat (its UpdateFunc is not called), or
// whose UpdateFunc returns such a state, a state of a name it was not given, or a token
// above math.MaxInt64. So every store keeps the same states.
//
// Ownership: Load returns new slices that belong to the caller; Save and Update keep
// neither the slices nor the states they are given or returned. Times round-trip with
// microsecond precision and compare with time.Time.Equal (the location may change).
//
// Implementations are safe for concurrent use by several schedulers (and machines);
// maintenancetest.RunStateStore checks all of this.
type StateStore interface {
	// Load returns the fence and every task's state, ordered by Name.
	Load(ctx context.Context) (Snapshot, error)
	// Save inserts or replaces (by Name) each of states, all or none, fenced by token:
	// ErrStaleToken when token is below the fence, else the fence rises to token. A
	// Save that names one task twice keeps the later state. Tools and tests seed or
	// repair state with it; the Scheduler writes with Update.
	Save(ctx context.Context, token uint64, states ...TaskState) error
	// Update reads the fence and the states of names, calls f with them, and writes
	// what f returns, all or nothing, atomically with respect to every other Update and
	// Save: see UpdateFunc.
	Update(ctx context.Context, names []string, f UpdateFunc) error
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

// checkNames checks the names of an Update: valid and distinct.
func checkNames(names []string) error {
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if err := validName(fmt.Sprintf("update: names[%d]", i), n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("%w: update: names[%d] %s repeats", ErrInvalid, i, quote(n))
		}
		seen[n] = true
	}
	return nil
}

// checkWrites checks what an UpdateFunc given names returned.
func checkWrites(names []string, raise uint64, writes []TaskState) error {
	if raise > math.MaxInt64 {
		return fmt.Errorf("%w: update: raise must be at most %d, got %d", ErrInvalid, int64(math.MaxInt64), raise)
	}
	for i, s := range writes {
		if !slices.Contains(names, s.Name) {
			return fmt.Errorf("%w: update: writes[%d] is of task %s, which the update was not given", ErrInvalid, i, quote(s.Name))
		}
		if err := s.Validate(); err != nil {
			return fmt.Errorf("update: writes[%d]: %w", i, err)
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

// Update implements StateStore. It holds the store's lock while f runs.
func (m *MemoryStateStore) Update(ctx context.Context, names []string, f UpdateFunc) error {
	if err := checkNames(names); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := make([]TaskState, len(names))
	for i, n := range names {
		st, ok := m.states[n]
		if !ok {
			st = TaskState{Name: n}
		}
		cur[i] = st
	}
	writes, raise, err := f(m.fence(), cur)
	if err != nil {
		return err
	}
	if err := checkWrites(names, raise, writes); err != nil {
		return err
	}
	for _, s := range writes {
		m.states[s.Name] = s
	}
	m.token = max(m.token, raise)
	return nil
}
