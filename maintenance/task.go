package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Class says whether a task contends for the heavy-maintenance lease.
type Class int

const (
	// Heavy tasks contend for the one exclusive lease: at most one runs at a time across
	// every scheduler that shares the Lease.
	Heavy Class = iota
	// OffLease tasks never take the lease. They run in Poll's second pass, beside the heavy
	// winner, so a cheap task never waits behind the heavy backlog.
	OffLease
)

func (c Class) valid() bool { return c == Heavy || c == OffLease }

// String returns "heavy" or "off-lease".
func (c Class) String() string {
	switch c {
	case Heavy:
		return "heavy"
	case OffLease:
		return "off-lease"
	default:
		return fmt.Sprintf("Class(%d)", int(c))
	}
}

// Rank orders tasks for fleet fairness: a heavy task about to acquire the lease yields at
// once to a waiter of higher rank (see Scheduler). A task's rank follows from its
// DataSafety and Bootstrap fields; TaskState records it, so that schedulers that do not
// know the task can rank its waiter. The zero Rank is that of an ordinary task, neither
// data-safety nor bootstrap.
type Rank int

const (
	// RankBootstrap is the rank of a Bootstrap task.
	RankBootstrap Rank = iota + 1
	// RankDataSafety is the rank of a DataSafety task, the highest.
	RankDataSafety
)

func (r Rank) valid() bool { return r >= 0 && r <= RankDataSafety }

// String returns "ordinary", "bootstrap" or "data-safety".
func (r Rank) String() string {
	switch r {
	case 0:
		return "ordinary"
	case RankBootstrap:
		return "bootstrap"
	case RankDataSafety:
		return "data-safety"
	default:
		return fmt.Sprintf("Rank(%d)", int(r))
	}
}

// DueFunc decides whether a task is due at now, given its durable state. A task disabled
// for this deployment is simply never due. An error leaves the task out of this poll
// and its state untouched.
type DueFunc func(ctx context.Context, now time.Time, st TaskState) (bool, error)

// RunFunc does a task's work. Its ctx is cancelled at the scheduler's MaxHold, when the
// lease is lost, and when Run's own context ends; a RunFunc must return promptly then.
type RunFunc func(ctx context.Context) error

// Gate is a soft dependency: the gated task is deferred (ReasonGate) while Producer is
// due or running — that is, behind. It is re-checked on every poll and never blocks
// harder than that: once the producer has run, the gated task is a candidate again.
type Gate struct {
	// Producer names the task whose output the gated task consumes.
	Producer string
}

// Task is one maintenance job in the registry. The order of the task list given to
// NewScheduler is the registry order, the final tie-break of every ranking.
type Task struct {
	// Name identifies the task; names are unique within a registry and key its durable
	// state, so schedulers of one fleet that share a StateStore agree on them.
	Name string
	// Class is Heavy (contends for the lease) or OffLease.
	Class Class
	// Cadence is how often the task should run. Zero means the task has no cadence: it
	// needs a Due func, and Pick ranks it by registry position instead of staleness.
	Cadence time.Duration
	// DataSafety tasks (backups) win any pick they are eligible for.
	DataSafety bool
	// Bootstrap tasks win any pick without an eligible data-safety candidate.
	Bootstrap bool
	// DependsOn names tasks that must not be running while this one starts.
	DependsOn []string
	// Gates are the soft producer dependencies of this task.
	Gates []Gate
	// Due decides due-ness; nil means due once Cadence has passed since LastRunAt (a
	// task that never ran is due at once).
	Due DueFunc
	// Run does the work.
	Run RunFunc
}

// rankOf returns t's fleet-fairness rank, the one its TaskState records.
func rankOf(t Task) Rank {
	switch {
	case t.DataSafety:
		return RankDataSafety
	case t.Bootstrap:
		return RankBootstrap
	default:
		return 0
	}
}

// isDue applies t.Due, or the cadence rule when Due is nil.
func (t Task) isDue(ctx context.Context, now time.Time, st TaskState) (bool, error) {
	if t.Due != nil {
		return t.Due(ctx, now, st)
	}
	if st.LastRunAt.IsZero() {
		return true, nil
	}
	return now.Sub(st.LastRunAt) >= t.Cadence, nil
}

// validateTasks reports every violation of a registry at once, each wrapping ErrInvalid
// and naming the task and field (see NewScheduler).
func validateTasks(tasks []Task) error {
	var errs []error
	bad := func(i int, name, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: task %d (%s): %s %s",
			ErrInvalid, i, quote(name), field, fmt.Sprintf(format, args...)))
	}
	names := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if err := validName("Name", t.Name); err != nil {
			errs = append(errs, fmt.Errorf("task %d: %w", i, err))
		} else if j, dup := names[t.Name]; dup {
			bad(i, t.Name, "Name", "duplicates task %d", j)
		} else {
			names[t.Name] = i
		}
	}
	for i, t := range tasks {
		if !t.Class.valid() {
			bad(i, t.Name, "Class", "must be Heavy or OffLease, got %d", int(t.Class))
		}
		if t.Cadence < 0 {
			bad(i, t.Name, "Cadence", "must not be negative, got %v", t.Cadence)
		}
		if t.Cadence == 0 && t.Due == nil {
			bad(i, t.Name, "Cadence", "must be positive without a Due func")
		}
		if t.Run == nil {
			bad(i, t.Name, "Run", "must not be nil")
		}
		for _, d := range t.DependsOn {
			if _, ok := names[d]; !ok {
				bad(i, t.Name, "DependsOn", "names unknown task %s", quote(d))
			} else if d == t.Name {
				bad(i, t.Name, "DependsOn", "names the task itself")
			}
		}
		for _, g := range t.Gates {
			if _, ok := names[g.Producer]; !ok {
				bad(i, t.Name, "Gates.Producer", "names unknown task %s", quote(g.Producer))
			} else if g.Producer == t.Name {
				bad(i, t.Name, "Gates.Producer", "names the task itself")
			}
		}
	}
	return errors.Join(errs...)
}
