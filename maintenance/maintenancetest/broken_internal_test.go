package maintenancetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// recorder is a tb that records failures instead of failing the test; Fatalf ends the
// goroutine as testing.T's does.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// failures runs check in its own goroutine and returns its failure messages.
func failures(check func(t tb)) []string {
	rec := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return rec.msgs
}

// brokenLease breaks one rule of the Lease contract on top of MemoryLease.
type brokenLease struct {
	*maintenance.MemoryLease
	fixedToken, renewForever, staleRelease, reacquire, noValidation bool
}

func (b *brokenLease) Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	if b.noValidation && holder == "" {
		holder = "anonymous"
	}
	if b.noValidation && ttl <= 0 {
		ttl = time.Minute
	}
	g, err := b.MemoryLease.Acquire(ctx, holder, ttl, now)
	if b.reacquire && errors.Is(err, maintenance.ErrLeaseHeld) {
		if cur, ok, _ := b.Current(ctx, now); ok && cur.Holder == holder {
			return cur, nil
		}
	}
	if b.fixedToken && err == nil {
		g.Token = 1
	}
	return g, err
}

func (b *brokenLease) Renew(ctx context.Context, g maintenance.Grant, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	r, err := b.MemoryLease.Renew(ctx, g, ttl, now)
	if b.renewForever && errors.Is(err, maintenance.ErrHoldExceeded) {
		g.ExpiresAt = now.Add(ttl)
		return g, nil
	}
	return r, err
}

func (b *brokenLease) Release(ctx context.Context, g maintenance.Grant) error {
	err := b.MemoryLease.Release(ctx, g)
	if b.staleRelease && errors.Is(err, maintenance.ErrNotHolder) {
		return nil
	}
	return err
}

// brokenStore breaks one rule of the StateStore contract on top of MemoryStateStore.
type brokenStore struct {
	*maintenance.MemoryStateStore
	noFence, unsorted, partialBatch, noToken, dropsFields bool
}

func (b *brokenStore) Load(ctx context.Context) (maintenance.Snapshot, error) {
	snap, err := b.MemoryStateStore.Load(ctx)
	if b.unsorted {
		slices.Reverse(snap.States)
	}
	if b.noToken {
		snap.Token = 0
	}
	if b.dropsFields {
		for i := range snap.States {
			snap.States[i].DeferBlocker = ""
		}
	}
	return snap, err
}

func (b *brokenStore) Save(ctx context.Context, token uint64, states ...maintenance.TaskState) error {
	if b.noFence {
		snap, _ := b.MemoryStateStore.Load(ctx)
		token = max(token, snap.Token)
	}
	if b.partialBatch {
		for _, s := range states {
			if err := b.MemoryStateStore.Save(ctx, token, s); err != nil {
				return err
			}
		}
		return nil
	}
	return b.MemoryStateStore.Save(ctx, token, states...)
}

// TestSuitesCatchBrokenImplementations: every deliberately broken implementation fails
// at least one rule, each failure cites its rule, and the correct ones fail none.
func TestSuitesCatchBrokenImplementations(t *testing.T) {
	leases := map[string]func() *brokenLease{
		"correct":       func() *brokenLease { return &brokenLease{} },
		"fixed token":   func() *brokenLease { return &brokenLease{fixedToken: true} },
		"renew forever": func() *brokenLease { return &brokenLease{renewForever: true} },
		"stale release": func() *brokenLease { return &brokenLease{staleRelease: true} },
		"reacquire":     func() *brokenLease { return &brokenLease{reacquire: true} },
		"no validation": func() *brokenLease { return &brokenLease{noValidation: true} },
	}
	for name, mk := range leases {
		var msgs []string
		for _, r := range leaseRules() {
			msgs = append(msgs, failures(func(t tb) {
				r.check(t, func() maintenance.Lease {
					b := mk()
					b.MemoryLease = maintenance.NewMemoryLease(leaseMaxHold)
					return b
				})
			})...)
		}
		checkFailures(t, "lease "+name, name == "correct", msgs)
	}

	stores := map[string]brokenStore{
		"correct":       {},
		"no fence":      {noFence: true},
		"unsorted":      {unsorted: true},
		"partial batch": {partialBatch: true},
		"no token":      {noToken: true},
		"drops fields":  {dropsFields: true},
	}
	for name, proto := range stores {
		var msgs []string
		for _, r := range storeRules() {
			msgs = append(msgs, failures(func(t tb) {
				r.check(t, func() maintenance.StateStore {
					b := proto
					b.MemoryStateStore = maintenance.NewMemoryStateStore()
					return &b
				})
			})...)
		}
		checkFailures(t, "store "+name, name == "correct", msgs)
	}
}

func checkFailures(t *testing.T, name string, correct bool, msgs []string) {
	t.Helper()
	if correct {
		if len(msgs) > 0 {
			t.Errorf("%s: fails the suite: %q", name, msgs)
		}
		return
	}
	if len(msgs) == 0 {
		t.Errorf("%s: passes every rule; the suite misses the break", name)
	}
	for _, m := range msgs {
		if !strings.Contains(m, "rule: ") {
			t.Errorf("%s: failure does not cite its rule: %q", name, m)
		}
	}
}
