package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// Several daemons, each with its own pool, contend for one lease over several rounds: in
// every round exactly one holds it, the others get ErrLeaseHeld until its TTL lapses;
// tokens strictly increase from holder to holder; and once another holder has the lease, a
// stale holder can neither renew, nor release, nor write task state.
func TestLeaseAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	if err := postgres.Migrate(ctx, pgtest.PoolIn(t, schema, 1)); err != nil {
		t.Fatal(err)
	}
	const daemons, ttl = 5, time.Minute
	type daemon struct {
		name  string
		lease *postgres.Lease
		store *postgres.StateStore
	}
	ds := make([]daemon, daemons)
	for i := range ds {
		pool := pgtest.PoolIn(t, schema, 2)
		ds[i] = daemon{fmt.Sprintf("daemon-%d", i), postgres.NewLease(pool, "heavy", time.Hour), postgres.NewStateStore(pool)}
	}

	var prev maintenance.Grant
	var prevHolder int = -1
	now := t0
	for round := range 4 {
		grants := make([]maintenance.Grant, daemons)
		errs := make([]error, daemons)
		var wg sync.WaitGroup
		for i, d := range ds {
			wg.Go(func() { grants[i], errs[i] = d.lease.Acquire(ctx, d.name, ttl, now) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: %s and %s both acquired the lease", round, ds[winner].name, ds[i].name)
				}
				winner = i
			case !errors.Is(err, maintenance.ErrLeaseHeld):
				t.Fatalf("round %d: %s: Acquire = %v, want ErrLeaseHeld", round, ds[i].name, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody acquired a free lease", round)
		}
		g := grants[winner]
		if g.Holder != ds[winner].name || !g.AcquiredAt.Equal(now) || !g.ExpiresAt.Equal(now.Add(ttl)) {
			t.Fatalf("round %d: grant %+v, want holder %s from %v to %v", round, g, ds[winner].name, now, now.Add(ttl))
		}
		if round > 0 && g.Token <= prev.Token {
			t.Fatalf("round %d: token %d after %d: tokens must strictly increase", round, g.Token, prev.Token)
		}
		// The replaced holder is fenced off everywhere as soon as the new grant exists,
		// before the new holder has written anything.
		if prevHolder >= 0 {
			old := ds[prevHolder]
			if _, err := old.lease.Renew(ctx, prev, ttl, now); !errors.Is(err, maintenance.ErrNotHolder) {
				t.Fatalf("round %d: the replaced holder's Renew = %v, want ErrNotHolder", round, err)
			}
			if err := old.lease.Release(ctx, prev); !errors.Is(err, maintenance.ErrNotHolder) {
				t.Fatalf("round %d: the replaced holder's Release = %v, want ErrNotHolder", round, err)
			}
			err := old.store.Save(ctx, prev.Token, maintenance.TaskState{Name: "vacuum", LastOutcome: maintenance.OutcomeSucceeded})
			if !errors.Is(err, maintenance.ErrStaleToken) {
				t.Fatalf("round %d: the replaced holder's Save before the new holder's first = %v, want ErrStaleToken", round, err)
			}
		}
		if err := ds[winner].store.Save(ctx, g.Token, maintenance.TaskState{Name: "vacuum", Running: true, RunningBy: g.Holder, RunningToken: g.Token, RunningSince: now}); err != nil {
			t.Fatalf("round %d: the holder's Save: %v", round, err)
		}
		snap, err := ds[(winner+1)%daemons].store.Load(ctx)
		if err != nil || snap.Token != g.Token || len(snap.States) != 1 || snap.States[0].RunningBy != g.Holder {
			t.Fatalf("round %d: another daemon loads %+v, %v; want the holder's write at token %d", round, snap, err, g.Token)
		}

		// Half-way through the TTL everyone sees the holder and nobody else gets in.
		mid := now.Add(ttl / 2)
		for i, d := range ds {
			cur, ok, err := d.lease.Current(ctx, mid)
			if err != nil || !ok || !sameGrant(cur, g) {
				t.Fatalf("round %d: %s sees Current = %+v, %v, %v; want %+v", round, d.name, cur, ok, err, g)
			}
			if i == winner {
				continue
			}
			if _, err := d.lease.Acquire(ctx, d.name, ttl, mid); !errors.Is(err, maintenance.ErrLeaseHeld) {
				t.Fatalf("round %d: %s acquired a held lease: %v", round, d.name, err)
			}
		}
		// Just before expiry the lease is still held; at its TTL it lapses on its own.
		if _, ok, _ := ds[0].lease.Current(ctx, g.ExpiresAt.Add(-time.Microsecond)); !ok {
			t.Fatalf("round %d: the lease lapsed before its ExpiresAt", round)
		}
		if _, ok, _ := ds[0].lease.Current(ctx, g.ExpiresAt); ok {
			t.Fatalf("round %d: the lease is still held at its ExpiresAt", round)
		}
		prev, prevHolder, now = g, winner, g.ExpiresAt
	}
}

// MaxHold is enforced by the lease itself: renewals stop at MaxHold and a grant never
// outlives AcquiredAt + MaxHold, whichever daemon asks.
func TestLeaseMaxHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	pool := pgtest.PoolIn(t, schema, 1)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	l := postgres.NewLease(pool, "heavy", 10*time.Minute)
	g, err := l.Acquire(ctx, "a", 4*time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	g, err = l.Renew(ctx, g, 4*time.Minute, t0.Add(3*time.Minute))
	if err != nil || !g.ExpiresAt.Equal(t0.Add(7*time.Minute)) {
		t.Fatalf("Renew = %+v, %v; want expiry at +7m", g, err)
	}
	g, err = l.Renew(ctx, g, 4*time.Minute, t0.Add(6*time.Minute))
	if err != nil || !g.ExpiresAt.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("Renew near MaxHold = %+v, %v; want expiry capped at AcquiredAt+MaxHold", g, err)
	}
	g, err = l.Renew(ctx, g, 4*time.Minute, t0.Add(9*time.Minute))
	if err != nil || !g.ExpiresAt.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("Renew just before MaxHold = %+v, %v; want expiry still capped", g, err)
	}
	other := postgres.NewLease(pgtest.PoolIn(t, schema, 1), "heavy", 10*time.Minute)
	if _, err := other.Acquire(ctx, "b", time.Minute, t0.Add(10*time.Minute-time.Microsecond)); !errors.Is(err, maintenance.ErrLeaseHeld) {
		t.Fatalf("another daemon just before AcquiredAt+MaxHold: %v, want ErrLeaseHeld", err)
	}
	if _, err := other.Acquire(ctx, "b", time.Minute, t0.Add(10*time.Minute)); err != nil {
		t.Fatalf("another daemon at AcquiredAt+MaxHold: %v, want the lease", err)
	}
}

func sameGrant(a, b maintenance.Grant) bool {
	return a.Holder == b.Holder && a.Token == b.Token && a.AcquiredAt.Equal(b.AcquiredAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

// A lease name or holder that is not a valid name — a megabyte long, past the
// index's limit, or with a control character — is maintenance.ErrInvalid, refused before
// anything reaches the server.
func TestLeaseRefusesBadNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, name := range []string{strings.Repeat("x", 1<<20), "", "heavy\x00"} {
		l := postgres.NewLease(pool, name, time.Hour)
		_, err := l.Acquire(ctx, "a", time.Minute, t0)
		_, _, cerr := l.Current(ctx, t0)
		rerr := l.Release(ctx, maintenance.Grant{Holder: "a", Token: 1})
		for _, e := range []error{err, cerr, rerr} {
			if !errors.Is(e, maintenance.ErrInvalid) || !strings.Contains(e.Error(), "lease name") {
				t.Errorf("a lease named %.20q: %v, want ErrInvalid naming the lease name", name, e)
			}
		}
	}
	if _, err := postgres.NewLease(pool, "heavy", time.Hour).Acquire(ctx, strings.Repeat("h", 1<<20), time.Minute, t0); !errors.Is(err, maintenance.ErrInvalid) {
		t.Errorf("a megabyte holder: %v, want ErrInvalid", err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM rota_leases`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("refused calls wrote %d lease rows (%v)", rows, err)
	}
}
