package maintenancetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// base is the suites' first instant: whole seconds, so every store round-trips it.
var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// leaseRule is one rule of the Lease suite; fresh builds a new lease with the suite's
// maxHold.
type leaseRule struct {
	name  string
	check func(t tb, fresh func() maintenance.Lease)
}

// The Lease suite's fixed knobs.
const (
	leaseMaxHold = time.Hour
	leaseTTL     = 10 * time.Minute
)

// RunLease runs the Lease conformance suite: one subtest per rule of maintenance.Lease
// (LeaseRules lists them). newLease must return a fresh lease, free and never granted,
// that refuses renewals once now − AcquiredAt ≥ maxHold.
func RunLease(t *testing.T, newLease func(t *testing.T, maxHold time.Duration) maintenance.Lease) {
	t.Helper()
	for _, r := range leaseRules() {
		t.Run(r.name, func(t *testing.T) {
			r.check(t, func() maintenance.Lease {
				t.Helper()
				l := newLease(t, leaseMaxHold)
				if l == nil {
					t.Fatalf("the factory returned a nil Lease")
				}
				return l
			})
		})
	}
}

// LeaseRules returns the names of the Lease suite's rules, in the order RunLease runs
// them as subtests.
func LeaseRules() []string {
	var names []string
	for _, r := range leaseRules() {
		names = append(names, r.name)
	}
	return names
}

func leaseRules() []leaseRule {
	const maxHold, ttl = leaseMaxHold, leaseTTL
	ctx := context.Background()
	acquire := func(t tb, l maintenance.Lease, holder string, now time.Time) maintenance.Grant {
		t.Helper()
		g, err := l.Acquire(ctx, holder, ttl, now)
		if err != nil {
			t.Fatalf("Acquire(%q, %v, %v): %v", holder, ttl, now, err)
		}
		return g
	}
	var rules []leaseRule

	rules = append(rules, leaseRule{"a free lease has no current grant", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		if g, ok, err := l.Current(ctx, base); err != nil || ok {
			t.Fatalf("rule: a fresh lease is free: Current = %+v, %v, %v", g, ok, err)
		}
	}})

	rules = append(rules, leaseRule{"acquire grants holder a positive token until at most now+ttl", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		g := acquire(t, l, "a", base)
		if g.Holder != "a" || g.Token == 0 || !g.AcquiredAt.Equal(base) ||
			!g.ExpiresAt.After(base) || g.ExpiresAt.After(base.Add(ttl)) {
			t.Fatalf("rule: a grant names its holder, a positive token, AcquiredAt = now and now < ExpiresAt ≤ now+ttl: got %+v", g)
		}
		cur, ok, err := l.Current(ctx, base.Add(time.Minute))
		if err != nil || !ok || cur.Token != g.Token || cur.Holder != "a" {
			t.Fatalf("rule: Current returns the live grant: got %+v, %v, %v; want %+v", cur, ok, err, g)
		}
	}})

	rules = append(rules, leaseRule{"a live grant refuses every acquirer, its holder included", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		g := acquire(t, l, "a", base)
		for _, h := range []string{"b", "a"} {
			if _, err := l.Acquire(ctx, h, ttl, base.Add(time.Minute)); !errors.Is(err, maintenance.ErrLeaseHeld) {
				t.Errorf("rule: Acquire by %q while a grant is live is ErrLeaseHeld: got %v", h, err)
			}
		}
		cur, ok, err := l.Current(ctx, base.Add(time.Minute))
		if err != nil || !ok || cur.Token != g.Token {
			t.Fatalf("rule: a refused Acquire changes nothing: Current = %+v, %v, %v; want token %d", cur, ok, err, g.Token)
		}
	}})

	rules = append(rules, leaseRule{"exactly one of many concurrent acquirers wins", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		grants := make([]maintenance.Grant, n)
		for i := range n {
			wg.Go(func() {
				grants[i], errs[i] = l.Acquire(ctx, string(rune('a'+i)), ttl, base)
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("rule: exactly one acquirer wins: %q and %q both did", grants[won].Holder, grants[i].Holder)
			case err == nil:
				won = i
			case !errors.Is(err, maintenance.ErrLeaseHeld):
				t.Fatalf("rule: losing acquirers get ErrLeaseHeld: got %v", err)
			}
		}
		if won < 0 {
			t.Fatalf("rule: exactly one acquirer wins: none did")
		}
		cur, ok, err := l.Current(ctx, base)
		if err != nil || !ok || cur.Token != grants[won].Token || cur.Holder != grants[won].Holder {
			t.Fatalf("rule: the winner holds the lease: Current = %+v, %v, %v; want %+v", cur, ok, err, grants[won])
		}
	}})

	rules = append(rules, leaseRule{"tokens strictly increase across grants", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		now := base
		var last uint64
		for i := range 6 {
			g := acquire(t, l, string(rune('a'+i%2)), now)
			if g.Token <= last {
				t.Fatalf("rule: each grant's token exceeds every earlier one's: grant %d token %d after %d", i, g.Token, last)
			}
			last = g.Token
			if i%2 == 0 {
				if err := l.Release(ctx, g); err != nil {
					t.Fatalf("Release: %v", err)
				}
			} else {
				now = g.ExpiresAt // let it lapse
			}
			now = now.Add(time.Second)
		}
	}})

	rules = append(rules, leaseRule{"a grant lapses at its expiry and another holder acquires", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		g := acquire(t, l, "a", base)
		if _, ok, err := l.Current(ctx, g.ExpiresAt); err != nil || ok {
			t.Fatalf("rule: a grant is expired at ExpiresAt: Current(%v) = %v, %v", g.ExpiresAt, ok, err)
		}
		g2 := acquire(t, l, "b", g.ExpiresAt)
		if g2.Token <= g.Token {
			t.Fatalf("rule: tokens only grow: %d after %d", g2.Token, g.Token)
		}
	}})

	rules = append(rules, leaseRule{"renew extends the grant and keeps its token and AcquiredAt", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		g := acquire(t, l, "a", base)
		at := base.Add(ttl / 2)
		r, err := l.Renew(ctx, g, ttl, at)
		if err != nil {
			t.Fatalf("rule: the holder renews a live grant before MaxHold: %v", err)
		}
		if r.Token != g.Token || !r.AcquiredAt.Equal(g.AcquiredAt) || r.Holder != g.Holder ||
			!r.ExpiresAt.After(g.ExpiresAt) || r.ExpiresAt.After(at.Add(ttl)) {
			t.Fatalf("rule: renew keeps Holder, Token and AcquiredAt and moves ExpiresAt to at most now+ttl: got %+v from %+v", r, g)
		}
		if _, ok, _ := l.Current(ctx, g.ExpiresAt); !ok {
			t.Fatalf("rule: a renewed grant is live past its old expiry %v", g.ExpiresAt)
		}
	}})

	rules = append(rules, leaseRule{"a holder past MaxHold cannot renew and a new holder gets the lease within one TTL", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		g := acquire(t, l, "a", base)
		step := ttl / 2
		lastRenew := base
		for at := base.Add(step); at.Sub(base) < maxHold; at = at.Add(step) {
			r, err := l.Renew(ctx, g, ttl, at)
			if err != nil {
				t.Fatalf("rule: renewals before MaxHold succeed: Renew at +%v: %v", at.Sub(base), err)
			}
			if r.ExpiresAt.After(at.Add(ttl)) {
				t.Fatalf("rule: no grant expires later than now+ttl: %v > %v", r.ExpiresAt, at.Add(ttl))
			}
			g, lastRenew = r, at
		}
		if _, err := l.Renew(ctx, g, ttl, base.Add(maxHold)); !errors.Is(err, maintenance.ErrHoldExceeded) {
			t.Fatalf("rule: Renew once now − AcquiredAt ≥ MaxHold is ErrHoldExceeded: got %v", err)
		}
		deadline := lastRenew.Add(ttl)
		g2, err := l.Acquire(ctx, "b", ttl, deadline)
		if err != nil {
			t.Fatalf("rule: a new holder acquires within one TTL of the last renewal (at %v): %v", deadline, err)
		}
		if g2.Token <= g.Token {
			t.Fatalf("rule: tokens only grow: %d after %d", g2.Token, g.Token)
		}
	}})

	rules = append(rules, leaseRule{"a stale token cannot renew or release", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		old := acquire(t, l, "a", base)
		cur := acquire(t, l, "b", old.ExpiresAt)
		at := old.ExpiresAt.Add(time.Minute)
		if _, err := l.Renew(ctx, old, ttl, at); !errors.Is(err, maintenance.ErrNotHolder) {
			t.Errorf("rule: Renew with a replaced grant is ErrNotHolder: got %v", err)
		}
		if err := l.Release(ctx, old); !errors.Is(err, maintenance.ErrNotHolder) {
			t.Errorf("rule: Release with a replaced grant is ErrNotHolder: got %v", err)
		}
		got, ok, err := l.Current(ctx, at)
		if err != nil || !ok || got.Token != cur.Token || got.Holder != "b" {
			t.Fatalf("rule: a stale token changes nothing: Current = %+v, %v, %v; want %+v", got, ok, err, cur)
		}
	}})

	rules = append(rules, leaseRule{"renewing an expired grant is ErrNotHolder", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		g := acquire(t, l, "a", base)
		if _, err := l.Renew(ctx, g, ttl, g.ExpiresAt); !errors.Is(err, maintenance.ErrNotHolder) {
			t.Fatalf("rule: Renew at or after ExpiresAt (before MaxHold) is ErrNotHolder: got %v", err)
		}
	}})

	rules = append(rules, leaseRule{"release frees the lease and a second release is ErrNotHolder", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		g := acquire(t, l, "a", base)
		if err := l.Release(ctx, g); err != nil {
			t.Fatalf("rule: the holder releases its live grant: %v", err)
		}
		if _, ok, err := l.Current(ctx, base); err != nil || ok {
			t.Fatalf("rule: a released lease is free: Current = %v, %v", ok, err)
		}
		if err := l.Release(ctx, g); !errors.Is(err, maintenance.ErrNotHolder) {
			t.Errorf("rule: releasing twice is ErrNotHolder: got %v", err)
		}
		if _, err := l.Renew(ctx, g, ttl, base); !errors.Is(err, maintenance.ErrNotHolder) {
			t.Errorf("rule: renewing a released grant is ErrNotHolder: got %v", err)
		}
		g2 := acquire(t, l, "b", base)
		if g2.Token <= g.Token {
			t.Fatalf("rule: tokens only grow: %d after %d", g2.Token, g.Token)
		}
	}})

	rules = append(rules, leaseRule{"bad input wraps ErrInvalid and changes nothing", func(t tb, fresh func() maintenance.Lease) {
		l := fresh()
		if _, err := l.Acquire(ctx, "", ttl, base); !errors.Is(err, maintenance.ErrInvalid) {
			t.Errorf("rule: an empty holder is ErrInvalid: got %v", err)
		}
		for _, bad := range []time.Duration{0, -time.Second} {
			if _, err := l.Acquire(ctx, "a", bad, base); !errors.Is(err, maintenance.ErrInvalid) {
				t.Errorf("rule: ttl %v is ErrInvalid: got %v", bad, err)
			}
		}
		if _, ok, err := l.Current(ctx, base); err != nil || ok {
			t.Fatalf("rule: a refused Acquire grants nothing: Current = %v, %v", ok, err)
		}
		g := acquire(t, l, "a", base)
		if _, err := l.Renew(ctx, g, 0, base); !errors.Is(err, maintenance.ErrInvalid) {
			t.Errorf("rule: Renew with ttl 0 is ErrInvalid: got %v", err)
		}
		if got, ok, _ := l.Current(ctx, base); !ok || !got.ExpiresAt.Equal(g.ExpiresAt) {
			t.Errorf("rule: a refused Renew changes nothing: Current = %+v, %v; want %+v", got, ok, g)
		}
	}})
	return rules
}
