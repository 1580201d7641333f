package rotadynamo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

// Lease is a maintenance.Lease on the table: the one exclusive heavy-maintenance lease of
// a fleet, one item named by the lease's name. OpenStores builds it; every daemon of the
// fleet gives the same StoresConfig.LeaseName. It is safe for concurrent use.
//
// Every call that changes the lease reads the item, strongly consistent, decides in Go
// with the rules of maintenance.MemoryLease, and writes it conditional on the version it
// read, so two daemons that Acquire at once get one grant between them and the other
// ErrLeaseHeld; a write that loses a race reads again. Tokens count up in the item and
// never go back. Time is the caller's now: daemons whose clocks disagree disagree about
// expiry by as much. Times are kept to the nanosecond.
type Lease struct {
	d       *db
	name    string
	maxHold time.Duration
}

var _ maintenance.Lease = (*Lease)(nil)

// The attributes of the lease item (partition leasePK(name), sort key skLease).
const (
	skLease        = "L"
	attrLeaseToken = "tok"
	attrLeaseHeld  = "held"
	attrHolder     = "who"
	attrAcquired   = "acq"
	attrExpires    = "exp"
)

// leaseRec is the stored state of a lease.
type leaseRec struct {
	exists   bool
	ver      int64
	token    uint64
	held     bool
	holder   string
	acquired time.Time
	expires  time.Time
}

func (r leaseRec) grant() maintenance.Grant {
	return maintenance.Grant{Holder: r.holder, Token: r.token, AcquiredAt: norm(r.acquired), ExpiresAt: norm(r.expires)}
}

func (r leaseRec) live(now time.Time) bool { return r.held && now.Before(r.expires) }

func (l *Lease) read(ctx context.Context) (leaseRec, error) {
	m, err := l.d.get(ctx, key(leasePK(l.name), skLease), true)
	if err != nil || m == nil {
		return leaseRec{}, err
	}
	it := &item{m: m}
	r := leaseRec{exists: true, ver: it.int(attrVersion), token: it.uint(attrLeaseToken), held: it.bool(attrLeaseHeld),
		holder: it.str(attrHolder), acquired: it.time(attrAcquired), expires: it.time(attrExpires)}
	return r, it.err
}

// change reads the lease, lets decide compute its next state, and writes that under the
// version read, again from the read when another write came first. decide's error writes
// nothing.
func (l *Lease) change(ctx context.Context, op string, decide func(cur leaseRec) (leaseRec, error)) (leaseRec, error) {
	var next leaseRec
	err := retry(ctx, func() error {
		cur, err := l.read(ctx)
		if err != nil {
			return err
		}
		if next, err = decide(cur); err != nil {
			return err
		}
		up := newUpdate(key(leasePK(l.name), skLease)).set(attrVersion, nv(cur.ver+1)).set(attrLeaseToken, uv(next.token))
		up.set(attrLeaseHeld, bv(next.held)).set(attrHolder, sv(next.holder)).set(attrAcquired, tv(next.acquired)).set(attrExpires, tv(next.expires))
		if cur.exists {
			up.cond(func(e *expr) string { return e.n(attrVersion) + " = " + e.v(nv(cur.ver)) })
		} else {
			up.cond(func(e *expr) string { return "attribute_not_exists(" + e.n(attrPK) + ")" })
		}
		_, err = l.d.update(ctx, up.input())
		if conditionFailed(err) {
			return errConflict
		}
		return err
	})
	if err != nil && !isLeaseOutcome(err) {
		err = interpret(ctx, "Lease."+op, err)
	}
	return next, err
}

func isLeaseOutcome(err error) bool {
	return errors.Is(err, maintenance.ErrLeaseHeld) || errors.Is(err, maintenance.ErrNotHolder) ||
		errors.Is(err, maintenance.ErrHoldExceeded) || errors.Is(err, maintenance.ErrInvalid)
}

// check refuses what Acquire and Renew cannot store: a bad holder, ttl or now.
func (l *Lease) check(op, holder string, ttl time.Duration, now time.Time) error {
	if err := vocab.LeaseCall(maintenance.ErrInvalid, holder, ttl, now); err != nil {
		return fmt.Errorf("rotadynamo: Lease.%s: %w", op, err)
	}
	return nil
}

// expiry is now+ttl capped at acquired+maxHold, or maintenance.ErrInvalid when that lies
// outside years 1 to 9999 UTC.
func (l *Lease) expiry(acquired, now time.Time, ttl time.Duration) (time.Time, error) {
	return vocab.LeaseExpiry(maintenance.ErrInvalid, acquired, now, ttl, l.maxHold)
}

// Acquire grants the lease to holder until now+ttl (or AcquiredAt+maxHold, if earlier)
// with a new, greater token, or returns maintenance.ErrLeaseHeld while a live grant exists
// — also when holder is the one holding it.
func (l *Lease) Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	if err := l.check("Acquire", holder, ttl, now); err != nil {
		return maintenance.Grant{}, err
	}
	exp, err := l.expiry(now, now, ttl)
	if err != nil {
		return maintenance.Grant{}, fmt.Errorf("rotadynamo: Lease.Acquire: %w", err)
	}
	r, err := l.change(ctx, "Acquire", func(cur leaseRec) (leaseRec, error) {
		if cur.live(now) {
			return cur, fmt.Errorf("rotadynamo: Lease.Acquire: held by %q until %v: %w", cur.holder, cur.expires, maintenance.ErrLeaseHeld)
		}
		if cur.token == math.MaxInt64 {
			return cur, errors.New("the lease's tokens are exhausted")
		}
		return leaseRec{token: cur.token + 1, held: true, holder: holder, acquired: now, expires: exp}, nil
	})
	if err != nil {
		return maintenance.Grant{}, err
	}
	return r.grant(), nil
}

// Renew extends the live grant g to now+ttl (capped at AcquiredAt+maxHold), keeping its
// Token and AcquiredAt. It returns maintenance.ErrNotHolder when g was replaced or
// released, else maintenance.ErrHoldExceeded once now − AcquiredAt ≥ maxHold, else
// ErrNotHolder when g has expired.
func (l *Lease) Renew(ctx context.Context, g maintenance.Grant, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	if err := l.check("Renew", g.Holder, ttl, now); err != nil {
		return maintenance.Grant{}, err
	}
	r, err := l.change(ctx, "Renew", func(cur leaseRec) (leaseRec, error) {
		if !cur.held || cur.token != g.Token {
			return cur, fmt.Errorf("rotadynamo: Lease.Renew: token %d by %q: replaced or released: %w", g.Token, g.Holder, maintenance.ErrNotHolder)
		}
		if held := now.Sub(cur.acquired); held >= l.maxHold {
			return cur, fmt.Errorf("rotadynamo: Lease.Renew: token %d by %q held %v of %v: %w", g.Token, g.Holder, held, l.maxHold, maintenance.ErrHoldExceeded)
		}
		if !cur.live(now) {
			return cur, fmt.Errorf("rotadynamo: Lease.Renew: token %d by %q: expired at %v: %w", g.Token, g.Holder, cur.expires, maintenance.ErrNotHolder)
		}
		exp, err := l.expiry(cur.acquired, now, ttl)
		if err != nil {
			return cur, err
		}
		cur.expires = exp
		return cur, nil
	})
	if err != nil {
		return maintenance.Grant{}, err
	}
	return r.grant(), nil
}

// Release ends g at once. It returns maintenance.ErrNotHolder when a later grant replaced
// g or g was already released; releasing an expired grant nobody replaced succeeds.
func (l *Lease) Release(ctx context.Context, g maintenance.Grant) error {
	_, err := l.change(ctx, "Release", func(cur leaseRec) (leaseRec, error) {
		if !cur.held || cur.token != g.Token {
			return cur, fmt.Errorf("rotadynamo: Lease.Release: token %d by %q: %w", g.Token, g.Holder, maintenance.ErrNotHolder)
		}
		cur.held = false
		return cur, nil
	})
	return err
}

// Current returns the live grant at now, or false when the lease is free: one strongly
// consistent read.
func (l *Lease) Current(ctx context.Context, now time.Time) (maintenance.Grant, bool, error) {
	if err := vocab.Time(maintenance.ErrInvalid, "now", now); err != nil {
		return maintenance.Grant{}, false, fmt.Errorf("rotadynamo: Lease.Current: %w", err)
	}
	cur, err := l.read(ctx)
	if err != nil {
		return maintenance.Grant{}, false, interpret(ctx, "Lease.Current", err)
	}
	if !cur.live(now) {
		return maintenance.Grant{}, false, nil
	}
	return cur.grant(), true, nil
}
