package maintenance

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Grant is one holding of the lease.
type Grant struct {
	// Holder names who holds it (a scheduler's Config.Holder).
	Holder string
	// Token is the fencing token: every grant's token is greater than every earlier
	// grant's of the same lease.
	Token uint64
	// AcquiredAt is when the grant was made; renewals keep it.
	AcquiredAt time.Time
	// ExpiresAt is when the grant lapses unless renewed; at ExpiresAt it is expired.
	ExpiresAt time.Time
}

// Lease is the one exclusive heavy-maintenance lease of a daemon or a fleet.
//
// Rules every implementation keeps (maintenancetest.RunLease checks them):
//   - At most one grant is live at a time: a grant is live from AcquiredAt until
//     ExpiresAt (exclusive) unless released or replaced.
//   - Tokens only grow: each grant's token is positive and greater than every earlier
//     grant's.
//   - MaxHold is a property of the lease: no renewal is granted once
//     now − AcquiredAt ≥ MaxHold, and no grant's ExpiresAt is later than now + ttl of the
//     call that set it, so a stuck holder loses the lease within one TTL of its last
//     renewal.
//   - Time is the caller's now; the lease never reads a clock.
//   - Bad input (empty holder, ttl ≤ 0) wraps ErrInvalid; a call that fails changes
//     nothing. Implementations must be safe for concurrent use.
type Lease interface {
	// Acquire grants the lease to holder until now+ttl (or earlier, at MaxHold) with a
	// new, greater token, or returns ErrLeaseHeld while a live grant exists — also when
	// holder is the one holding it: a holder that wants more time calls Renew.
	Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (Grant, error)
	// Renew extends the live grant g to now+ttl (or earlier, at MaxHold), keeping its
	// Token and AcquiredAt. It returns ErrNotHolder when a later grant replaced g or g
	// was released; else ErrHoldExceeded once now − g.AcquiredAt ≥ MaxHold; else
	// ErrNotHolder when g has expired.
	Renew(ctx context.Context, g Grant, ttl time.Duration, now time.Time) (Grant, error)
	// Release ends g at once. It returns ErrNotHolder when a later grant replaced g or g
	// was already released; releasing an expired grant nobody replaced succeeds.
	Release(ctx context.Context, g Grant) error
	// Current returns the live grant at now, or false when the lease is free.
	Current(ctx context.Context, now time.Time) (Grant, bool, error)
}

// MemoryLease is an in-memory Lease for the schedulers of one process. Safe for
// concurrent use.
type MemoryLease struct {
	maxHold time.Duration

	mu        sync.Mutex
	cur       Grant
	has       bool // cur was granted and not released
	lastToken uint64
}

var _ Lease = (*MemoryLease)(nil)

// NewMemoryLease returns a free lease whose grants cannot be renewed past maxHold and
// never expire later than AcquiredAt + maxHold. It panics if maxHold ≤ 0.
func NewMemoryLease(maxHold time.Duration) *MemoryLease {
	if maxHold <= 0 {
		panic(fmt.Sprintf("maintenance: NewMemoryLease: maxHold %v must be positive", maxHold))
	}
	return &MemoryLease{maxHold: maxHold}
}

func checkLeaseArgs(op, holder string, ttl time.Duration) error {
	if holder == "" {
		return fmt.Errorf("maintenance: %s: holder: empty: %w", op, ErrInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("maintenance: %s: ttl %v: not positive: %w", op, ttl, ErrInvalid)
	}
	return nil
}

func (l *MemoryLease) expiry(acquired, now time.Time, ttl time.Duration) time.Time {
	exp := now.Add(ttl)
	if capAt := acquired.Add(l.maxHold); exp.After(capAt) {
		exp = capAt
	}
	return exp
}

// Acquire implements Lease.
func (l *MemoryLease) Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (Grant, error) {
	if err := checkLeaseArgs("acquire", holder, ttl); err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.has && now.Before(l.cur.ExpiresAt) {
		return Grant{}, fmt.Errorf("maintenance: acquire by %q: held by %q until %v: %w",
			holder, l.cur.Holder, l.cur.ExpiresAt, ErrLeaseHeld)
	}
	l.lastToken++
	l.cur = Grant{Holder: holder, Token: l.lastToken, AcquiredAt: now, ExpiresAt: l.expiry(now, now, ttl)}
	l.has = true
	return l.cur, nil
}

// Renew implements Lease.
func (l *MemoryLease) Renew(ctx context.Context, g Grant, ttl time.Duration, now time.Time) (Grant, error) {
	if err := checkLeaseArgs("renew", g.Holder, ttl); err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.has || l.cur.Token != g.Token {
		return Grant{}, fmt.Errorf("maintenance: renew token %d by %q: replaced or released: %w", g.Token, g.Holder, ErrNotHolder)
	}
	if held := now.Sub(l.cur.AcquiredAt); held >= l.maxHold {
		return Grant{}, fmt.Errorf("maintenance: renew token %d by %q: held %v of %v: %w",
			g.Token, g.Holder, held, l.maxHold, ErrHoldExceeded)
	}
	if !now.Before(l.cur.ExpiresAt) {
		return Grant{}, fmt.Errorf("maintenance: renew token %d by %q: expired at %v: %w", g.Token, g.Holder, l.cur.ExpiresAt, ErrNotHolder)
	}
	l.cur.ExpiresAt = l.expiry(l.cur.AcquiredAt, now, ttl)
	return l.cur, nil
}

// Release implements Lease.
func (l *MemoryLease) Release(ctx context.Context, g Grant) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.has || l.cur.Token != g.Token {
		return fmt.Errorf("maintenance: release token %d by %q: %w", g.Token, g.Holder, ErrNotHolder)
	}
	l.has = false
	return nil
}

// Current implements Lease.
func (l *MemoryLease) Current(ctx context.Context, now time.Time) (Grant, bool, error) {
	if err := ctx.Err(); err != nil {
		return Grant{}, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.has && now.Before(l.cur.ExpiresAt) {
		return l.cur, true, nil
	}
	return Grant{}, false, nil
}
