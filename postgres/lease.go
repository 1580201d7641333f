package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

// Lease is a maintenance.Lease on PostgreSQL: the one exclusive heavy-maintenance lease of a
// fleet of daemons on several machines. Make one with NewLease after Migrate; every
// daemon of the fleet uses the same name. It is safe for concurrent use.
//
// The lease is one row of rota_leases. Every call that changes it locks the row (SELECT …
// FOR UPDATE) and decides in Go, with the same rules as maintenance.MemoryLease, so two
// daemons that call Acquire at once are serialized by the server: exactly one gets the
// grant, the other ErrLeaseHeld. Tokens count up in the row and never go back. Time is the
// caller's now, as everywhere in rota: daemons whose clocks disagree disagree about expiry
// by as much.
//
// Times are stored with microsecond precision: now is truncated to the microsecond, so a
// grant may start and expire up to a microsecond earlier than asked, never later. Holders,
// times and ttls are checked as maintenance.MemoryLease checks them, before anything is
// sent.
type Lease struct {
	pool    *pgxpool.Pool
	name    string
	bad     error // why name cannot be stored, nil when it can
	maxHold time.Duration
}

var _ maintenance.Lease = (*Lease)(nil)

// NewLease returns the lease called name in the pool's schema, whose grants cannot be renewed
// once held for maxHold and never expire later than AcquiredAt + maxHold. The row is created
// on first use. A name that is not a valid name (see Names and times in package
// maintenance) makes every call return a maintenance.ErrInvalid error. It panics if pool
// is nil or maxHold ≤ 0, like maintenance.NewMemoryLease.
func NewLease(pool *pgxpool.Pool, name string, maxHold time.Duration) *Lease {
	switch {
	case pool == nil:
		panic("postgres: NewLease: nil pool")
	case maxHold <= 0:
		panic(fmt.Sprintf("postgres: NewLease: maxHold %v must be positive", maxHold))
	}
	return &Lease{pool: pool, name: name, bad: vocab.Name(maintenance.ErrInvalid, "lease name", name), maxHold: maxHold}
}

// leaseRow is the stored state of a lease.
type leaseRow struct {
	token      int64
	held       bool
	holder     string
	acquiredAt *time.Time
	expiresAt  *time.Time
}

// grant returns the row's latest grant.
func (r leaseRow) grant() maintenance.Grant {
	return maintenance.Grant{Holder: r.holder, Token: uint64(r.token), AcquiredAt: fromTS(r.acquiredAt), ExpiresAt: fromTS(r.expiresAt)}
}

// live reports whether the row's grant is live at now.
func (r leaseRow) live(now time.Time) bool {
	return r.held && r.expiresAt != nil && now.Before(*r.expiresAt)
}

// check refuses, for Acquire and Renew, what the lease cannot store: a bad lease name,
// holder, ttl or now.
func (l *Lease) check(op, holder string, ttl time.Duration, now time.Time) error {
	if l.bad != nil {
		return fmt.Errorf("postgres: Lease.%s: %w", op, l.bad)
	}
	if err := vocab.LeaseCall(maintenance.ErrInvalid, holder, ttl, now); err != nil {
		return fmt.Errorf("postgres: Lease.%s: %w", op, err)
	}
	return nil
}

// expiry is now+ttl capped at acquired+maxHold, truncated to the microsecond, or
// maintenance.ErrInvalid when the server cannot hold it.
func (l *Lease) expiry(acquired, now time.Time, ttl time.Duration) (time.Time, error) {
	exp, err := vocab.LeaseExpiry(maintenance.ErrInvalid, acquired, now, ttl, l.maxHold)
	return exp.Truncate(time.Microsecond), err
}

// txIdleTimeout bounds how long the server keeps a Lease or StateStore transaction open
// while it waits for the client: a client that hangs mid-call (a partition without a reset)
// holds the lease row or the fence for at most this long, instead of until TCP gives up.
const txIdleTimeout = 5 * time.Second

// sqlIdleTimeout sets txIdleTimeout for the rest of the transaction.
var sqlIdleTimeout = fmt.Sprintf(`SELECT set_config('idle_in_transaction_session_timeout', '%d', true)`, txIdleTimeout.Milliseconds())

// change locks the lease's row (creating it if needed), lets decide compute the new row from
// the current one, and writes it: all in one transaction. decide returning an error writes
// nothing.
func (l *Lease) change(ctx context.Context, op string, decide func(cur leaseRow) (leaseRow, error)) (leaseRow, error) {
	var next leaseRow
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(sqlIdleTimeout)
		b.Queue(`INSERT INTO rota_leases (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, l.name)
		b.Queue(`SELECT token, held, holder, acquired_at, expires_at FROM rota_leases WHERE name = $1 FOR UPDATE`, l.name)
		br := tx.SendBatch(ctx, b)
		for range 2 {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		var cur leaseRow
		if err := br.QueryRow().Scan(&cur.token, &cur.held, &cur.holder, &cur.acquiredAt, &cur.expiresAt); err != nil {
			br.Close()
			return err
		}
		if err := br.Close(); err != nil {
			return err
		}
		var err error
		if next, err = decide(cur); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE rota_leases SET token = $2, held = $3, holder = $4, acquired_at = $5, expires_at = $6 WHERE name = $1`,
			l.name, next.token, next.held, next.holder, next.acquiredAt, next.expiresAt)
		return err
	})
	return next, interpretAs(ctx, "Lease."+op, maintenance.ErrInvalid, err)
}

// Acquire grants the lease to holder until now+ttl (or AcquiredAt+maxHold, if earlier) with
// a new, greater token, or returns maintenance.ErrLeaseHeld while a live grant exists —
// also when holder is the one holding it (it calls Renew for more time).
func (l *Lease) Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	if err := l.check("Acquire", holder, ttl, now); err != nil {
		return maintenance.Grant{}, err
	}
	now = now.Truncate(time.Microsecond)
	exp, err := l.expiry(now, now, ttl)
	if err != nil {
		return maintenance.Grant{}, fmt.Errorf("postgres: Lease.Acquire: %w", err)
	}
	row, err := l.change(ctx, "Acquire", func(cur leaseRow) (leaseRow, error) {
		if cur.live(now) {
			return cur, fmt.Errorf("held by %q until %v: %w", cur.holder, *cur.expiresAt, maintenance.ErrLeaseHeld)
		}
		if cur.token == math.MaxInt64 {
			return cur, errors.New("the lease's tokens are exhausted")
		}
		return leaseRow{token: cur.token + 1, held: true, holder: holder, acquiredAt: &now, expiresAt: &exp}, nil
	})
	if err != nil {
		return maintenance.Grant{}, err
	}
	return row.grant(), nil
}

// Renew extends the live grant g to now+ttl (capped at AcquiredAt+maxHold), keeping its
// Token and AcquiredAt. It returns maintenance.ErrNotHolder when g was replaced or released,
// else maintenance.ErrHoldExceeded once now − AcquiredAt ≥ maxHold, else ErrNotHolder when g
// has expired — the order of maintenance.MemoryLease.
func (l *Lease) Renew(ctx context.Context, g maintenance.Grant, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	if err := l.check("Renew", g.Holder, ttl, now); err != nil {
		return maintenance.Grant{}, err
	}
	now = now.Truncate(time.Microsecond)
	row, err := l.change(ctx, "Renew", func(cur leaseRow) (leaseRow, error) {
		if !cur.held || uint64(cur.token) != g.Token {
			return cur, fmt.Errorf("token %d by %q: replaced or released: %w", g.Token, g.Holder, maintenance.ErrNotHolder)
		}
		acquired := fromTS(cur.acquiredAt)
		if held := now.Sub(acquired); held >= l.maxHold {
			return cur, fmt.Errorf("token %d by %q held %v of %v: %w", g.Token, g.Holder, held, l.maxHold, maintenance.ErrHoldExceeded)
		}
		if !cur.live(now) {
			return cur, fmt.Errorf("token %d by %q: expired at %v: %w", g.Token, g.Holder, fromTS(cur.expiresAt), maintenance.ErrNotHolder)
		}
		exp, err := l.expiry(acquired, now, ttl)
		if err != nil {
			return cur, err
		}
		cur.expiresAt = &exp
		return cur, nil
	})
	if err != nil {
		return maintenance.Grant{}, err
	}
	return row.grant(), nil
}

// Release ends g at once. It returns maintenance.ErrNotHolder when a later grant replaced g
// or g was already released; releasing an expired grant nobody replaced succeeds.
func (l *Lease) Release(ctx context.Context, g maintenance.Grant) error {
	if l.bad != nil {
		return fmt.Errorf("postgres: Lease.Release: %w", l.bad)
	}
	_, err := l.change(ctx, "Release", func(cur leaseRow) (leaseRow, error) {
		if !cur.held || uint64(cur.token) != g.Token {
			return cur, fmt.Errorf("token %d by %q: %w", g.Token, g.Holder, maintenance.ErrNotHolder)
		}
		cur.held = false
		return cur, nil
	})
	return err
}

// Current returns the live grant at now, or false when the lease is free. It reads without
// locking.
func (l *Lease) Current(ctx context.Context, now time.Time) (maintenance.Grant, bool, error) {
	if l.bad != nil {
		return maintenance.Grant{}, false, fmt.Errorf("postgres: Lease.Current: %w", l.bad)
	}
	if err := vocab.Time(maintenance.ErrInvalid, "now", now); err != nil {
		return maintenance.Grant{}, false, fmt.Errorf("postgres: Lease.Current: %w", err)
	}
	now = now.Truncate(time.Microsecond)
	var cur leaseRow
	err := l.pool.QueryRow(ctx, `SELECT token, held, holder, acquired_at, expires_at FROM rota_leases WHERE name = $1`, l.name).
		Scan(&cur.token, &cur.held, &cur.holder, &cur.acquiredAt, &cur.expiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return maintenance.Grant{}, false, nil
	}
	if err != nil {
		return maintenance.Grant{}, false, interpretAs(ctx, "Lease.Current", maintenance.ErrInvalid, err)
	}
	if !cur.live(now) {
		return maintenance.Grant{}, false, nil
	}
	return cur.grant(), true, nil
}
