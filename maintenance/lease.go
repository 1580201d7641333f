package maintenance

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
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
// Every implementation keeps these rules, which maintenancetest.RunLease checks:
//   - At most one grant is live at a time: from AcquiredAt until ExpiresAt (exclusive),
//     unless released or replaced.
//   - Tokens only grow: each grant's token is positive, at most math.MaxInt64, and
//     greater than every earlier grant's.
//   - No renewal is granted once now − AcquiredAt ≥ MaxHold, and no ExpiresAt is later
//     than now + ttl of the call that set it, so a stuck holder loses the lease within
//     one TTL of its last renewal.
//   - Time is the caller's now; the lease reads no clock.
//   - Bad input wraps ErrInvalid and changes nothing: a holder that is not a valid name,
//     ttl ≤ 0, a now or an expiry outside years 1 to 9999 UTC (see Names and times in
//     the package documentation).
//   - A call that fails changes nothing. Implementations are safe for concurrent use.
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

// checkLeaseCall checks the arguments of Acquire or Renew.
func checkLeaseCall(op, holder string, ttl time.Duration, now time.Time) error {
	if err := validName(op+": holder", holder); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: %s: ttl must be positive, got %v", ErrInvalid, op, ttl)
	}
	return validTime(op+": now", now)
}

// expiry returns now + ttl capped at acquired + MaxHold, or ErrInvalid when that is
// outside years 1 to 9999 UTC.
func (l *MemoryLease) expiry(acquired, now time.Time, ttl time.Duration) (time.Time, error) {
	return vocab.LeaseExpiry(ErrInvalid, acquired, now, ttl, l.maxHold)
}

// Acquire implements Lease.
func (l *MemoryLease) Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (Grant, error) {
	if err := checkLeaseCall("acquire", holder, ttl, now); err != nil {
		return Grant{}, err
	}
	exp, err := l.expiry(now, now, ttl)
	if err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.has && now.Before(l.cur.ExpiresAt) {
		return Grant{}, fmt.Errorf("%w: acquire by %q: held by %q until %v",
			ErrLeaseHeld, holder, l.cur.Holder, l.cur.ExpiresAt)
	}
	l.lastToken++
	l.cur = Grant{Holder: holder, Token: l.lastToken, AcquiredAt: now, ExpiresAt: exp}
	l.has = true
	return l.cur, nil
}

// Renew implements Lease.
func (l *MemoryLease) Renew(ctx context.Context, g Grant, ttl time.Duration, now time.Time) (Grant, error) {
	if err := checkLeaseCall("renew", g.Holder, ttl, now); err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.has || l.cur.Token != g.Token {
		return Grant{}, fmt.Errorf("%w: renew token %d by %q: replaced or released", ErrNotHolder, g.Token, g.Holder)
	}
	if held := now.Sub(l.cur.AcquiredAt); held >= l.maxHold {
		return Grant{}, fmt.Errorf("%w: renew token %d by %q: held %v of %v",
			ErrHoldExceeded, g.Token, g.Holder, held, l.maxHold)
	}
	if !now.Before(l.cur.ExpiresAt) {
		return Grant{}, fmt.Errorf("%w: renew token %d by %q: expired at %v", ErrNotHolder, g.Token, g.Holder, l.cur.ExpiresAt)
	}
	exp, err := l.expiry(l.cur.AcquiredAt, now, ttl)
	if err != nil {
		return Grant{}, err
	}
	l.cur.ExpiresAt = exp
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
		return fmt.Errorf("%w: release token %d by %q", ErrNotHolder, g.Token, g.Holder)
	}
	l.has = false
	return nil
}

// Current implements Lease.
func (l *MemoryLease) Current(ctx context.Context, now time.Time) (Grant, bool, error) {
	if err := validTime("current: now", now); err != nil {
		return Grant{}, false, err
	}
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

// token returns the latest token l has granted.
func (l *MemoryLease) token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastToken
}
