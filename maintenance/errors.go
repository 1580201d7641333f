package maintenance

import "errors"

var (
	// ErrInvalid is returned, wrapped with the field and its value, for bad input: a bad
	// task registry or Config from NewScheduler, an empty holder or a non-positive ttl
	// from a Lease, a TaskState without a Name from a StateStore.
	ErrInvalid = errors.New("maintenance: invalid")

	// ErrLeaseHeld is returned by Lease.Acquire while a grant has not expired — whoever
	// holds it, the caller included.
	ErrLeaseHeld = errors.New("maintenance: lease held")

	// ErrNotHolder is returned by Lease.Renew and Lease.Release for a grant that is not
	// the lease's current one: a later grant replaced it, it was released, or (Renew
	// only) it has expired.
	ErrNotHolder = errors.New("maintenance: not the lease holder")

	// ErrHoldExceeded is returned by Lease.Renew once now − AcquiredAt ≥ the lease's
	// MaxHold: the holder must finish or stop, and the lease lapses at its expiry.
	ErrHoldExceeded = errors.New("maintenance: lease held for MaxHold")

	// ErrStaleToken is returned by StateStore.Save when the write's fencing token is
	// older than the highest token the store has seen; nothing is written.
	ErrStaleToken = errors.New("maintenance: stale fencing token")

	// ErrRunning is returned by Scheduler.Run when the scheduler is already running.
	ErrRunning = errors.New("maintenance: scheduler already running")
)
