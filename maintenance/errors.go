package maintenance

import "errors"

var (
	// ErrInvalid is returned, wrapped with what was wrong, for a bad call argument: a bad
	// task registry from NewScheduler, a bad holder, ttl or time from a
	// Lease, a bad TaskState or token from a StateStore, an unknown task from Complete.
	ErrInvalid = errors.New("maintenance: invalid")

	// ErrInvalidConfig is returned by NewScheduler, wrapped with the field and its value,
	// for each bad field of its Config.
	ErrInvalidConfig = errors.New("maintenance: invalid config")

	// ErrLeaseHeld is returned by Lease.Acquire while a grant has not expired — whoever
	// holds it, the caller included.
	ErrLeaseHeld = errors.New("maintenance: lease held")

	// ErrNotHolder is returned by Lease.Renew and Lease.Release for a grant that is not
	// the lease's current one: a later grant replaced it, it was released, or (Renew
	// only) it has expired; and by Scheduler.Renew and Scheduler.Complete for a run whose
	// claim has lapsed or was taken by another run. A task that Run cancels because its
	// grant or claim lapsed or was lost has a context cause that wraps it.
	ErrNotHolder = errors.New("maintenance: not the lease holder")

	// ErrHoldExceeded is returned by Lease.Renew once now − AcquiredAt ≥ the lease's
	// MaxHold: the holder must finish or stop, and the lease lapses at its expiry.
	ErrHoldExceeded = errors.New("maintenance: lease held for MaxHold")

	// ErrStaleToken is returned by StateStore.Save when the write's fencing token is
	// older than the store's fence, and by the Scheduler's writes of a heavy run whose
	// grant a later one replaced (Poll, Renew, Complete); nothing is written.
	ErrStaleToken = errors.New("maintenance: stale fencing token")
)

// errRunning is returned by Scheduler.Run when the scheduler is already running.
var errRunning = errors.New("maintenance: scheduler already running")
