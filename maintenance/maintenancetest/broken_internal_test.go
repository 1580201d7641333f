package maintenancetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
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

// wrap mimics a driver that encodes times as int64 microseconds since 1970 and wraps.
func wrap(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// brokenLease breaks one rule of the Lease contract on top of MemoryLease.
type brokenLease struct {
	*maintenance.MemoryLease
	fixedToken, renewForever, staleRelease, reacquire, noValidation, looseNames, wrapsTimes bool
}

// holder returns h as the broken lease passes it on.
func (b *brokenLease) holder(h string) string {
	if b.looseNames && !vocab.ValidName(h) {
		return "repaired"
	}
	if b.noValidation && h == "" {
		return "anonymous"
	}
	return h
}

func (b *brokenLease) time(t time.Time) time.Time {
	if b.wrapsTimes {
		return wrap(t)
	}
	return t
}

func (b *brokenLease) Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	holder, now = b.holder(holder), b.time(now)
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
	g.Holder, now = b.holder(g.Holder), b.time(now)
	r, err := b.MemoryLease.Renew(ctx, g, ttl, now)
	if b.renewForever && errors.Is(err, maintenance.ErrHoldExceeded) {
		g.ExpiresAt = now.Add(ttl)
		return g, nil
	}
	return r, err
}

func (b *brokenLease) Current(ctx context.Context, now time.Time) (maintenance.Grant, bool, error) {
	return b.MemoryLease.Current(ctx, b.time(now))
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
	noFence, unsorted, partialBatch, noToken, dropsFields, lagsLease, wrapsValues, clampsTokens bool
	// Update: read and write apart (a racy read-modify-write), ignore the raise, pass zero
	// states, write what the UpdateFunc returned with its error, skip the check of writes.
	racyUpdate, noRaise, blindUpdate, writesOnError, uncheckedWrites bool
}

func (b *brokenStore) Update(ctx context.Context, names []string, f maintenance.UpdateFunc) error {
	if !b.racyUpdate && !b.noRaise && !b.blindUpdate && !b.writesOnError && !b.uncheckedWrites {
		return b.MemoryStateStore.Update(ctx, names, f)
	}
	var fence uint64
	states := make([]maintenance.TaskState, len(names))
	for i, n := range names {
		states[i].Name = n
	}
	if !b.blindUpdate {
		var cur map[string]maintenance.TaskState
		if err := b.MemoryStateStore.Update(ctx, names, func(fc uint64, sts []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
			fence, cur = fc, map[string]maintenance.TaskState{}
			for _, st := range sts {
				cur[st.Name] = st
			}
			return nil, 0, nil
		}); err != nil {
			return err
		}
		for i, n := range names {
			states[i] = cur[n]
		}
	}
	if b.racyUpdate {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	writes, raise, err := f(fence, states)
	if err != nil && !b.writesOnError {
		return err
	}
	if b.noRaise {
		raise = 0
	}
	if b.uncheckedWrites {
		writes = slices.DeleteFunc(slices.Clone(writes), func(st maintenance.TaskState) bool { return st.Validate() != nil })
	}
	if raise > math.MaxInt64 {
		raise = 0
	}
	if err := b.MemoryStateStore.Update(ctx, nil, func(uint64, []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		return nil, raise, nil
	}); err != nil {
		return err
	}
	snap, err := b.MemoryStateStore.Load(ctx)
	if err != nil {
		return err
	}
	return b.MemoryStateStore.Save(ctx, snap.Token, writes...) // no check of the names
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
	if b.clampsTokens {
		token = min(token, math.MaxInt64)
	}
	if b.wrapsValues {
		states = slices.Clone(states)
		for i, st := range states {
			st.Class = maintenance.Class(int32(st.Class))
			st.LastRunAt, st.RunningSince = wrap(st.LastRunAt), wrap(st.RunningSince)
			st.DeferredSince, st.DeferredAt = wrap(st.DeferredSince), wrap(st.DeferredAt)
			states[i] = st
		}
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

// runRule runs one rule's check against the given factories and returns its failure
// messages.
func runRule(r rule, freshL func() maintenance.Lease, freshPair func() (maintenance.StateStore, maintenance.Lease)) []string {
	rec := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.check(&suite{t: rec, rule: r.text, freshL: freshL, freshPair: freshPair})
	}()
	<-done
	return rec.msgs
}

// Every deliberately broken implementation fails at least one rule, each failure cites
// its rule, and the correct ones fail none.
func TestSuitesCatchBrokenImplementations(t *testing.T) {
	leases := map[string]brokenLease{
		"correct":       {},
		"fixed token":   {fixedToken: true},
		"renew forever": {renewForever: true},
		"stale release": {staleRelease: true},
		"reacquire":     {reacquire: true},
		"no validation": {noValidation: true},
		"loose names":   {looseNames: true},
		"wraps times":   {wrapsTimes: true},
	}
	stores := map[string]brokenStore{
		"correct":          {},
		"no fence":         {noFence: true},
		"unsorted":         {unsorted: true},
		"partial batch":    {partialBatch: true},
		"no token":         {noToken: true},
		"drops fields":     {dropsFields: true},
		"lags the lease":   {lagsLease: true},
		"wraps values":     {wrapsValues: true},
		"clamps tokens":    {clampsTokens: true},
		"racy update":      {racyUpdate: true},
		"no raise":         {noRaise: true},
		"blind update":     {blindUpdate: true},
		"writes on error":  {writesOnError: true},
		"unchecked writes": {uncheckedWrites: true},
	}
	type implementation struct {
		name      string
		rules     []rule
		freshL    func() maintenance.Lease
		freshPair func() (maintenance.StateStore, maintenance.Lease)
	}
	var impls []implementation
	for name, proto := range leases {
		impls = append(impls, implementation{name: "lease " + name, rules: leaseRules, freshL: func() maintenance.Lease {
			b := proto
			b.MemoryLease = maintenance.NewMemoryLease(leaseMaxHold)
			return &b
		}})
	}
	for name, proto := range stores {
		impls = append(impls, implementation{name: "store " + name, rules: storeRules, freshPair: func() (maintenance.StateStore, maintenance.Lease) {
			b := proto
			b.MemoryStateStore = maintenance.NewMemoryStateStore()
			l := maintenance.NewMemoryLease(leaseMaxHold)
			if !b.lagsLease {
				b.FenceWith(l)
			}
			return &b, l
		}})
	}
	for _, im := range impls {
		var msgs []string
		for _, r := range im.rules {
			msgs = append(msgs, runRule(r, im.freshL, im.freshPair)...)
		}
		checkFailures(t, im.name, strings.HasSuffix(im.name, " correct"), msgs)
	}
}

// Rules have unique names, and the lines LeaseRules and StateStoreRules return name them.
func TestRuleNames(t *testing.T) {
	for _, rules := range [][]rule{leaseRules, storeRules} {
		seen := map[string]bool{}
		for _, r := range rules {
			if seen[r.name] || r.name == "" || r.text == "" {
				t.Errorf("rule %q: empty or duplicate", r.name)
			}
			seen[r.name] = true
		}
	}
	if got := LeaseRules()[0]; got != "FreeLease: a lease never granted has no current grant" {
		t.Errorf("LeaseRules()[0] = %q", got)
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
		if !strings.HasPrefix(m, "rule \"") || !strings.Contains(m, "\" broken: ") {
			t.Errorf("%s: failure does not cite its rule: %q", name, m)
		}
	}
}
