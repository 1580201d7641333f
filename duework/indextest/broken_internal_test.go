package indextest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// recorder is a tb that records failures instead of failing the test; Fatalf and Skipf
// end the goroutine like testing.T's do.
type recorder struct {
	mu      sync.Mutex
	msgs    []string
	skipped bool
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

func (r *recorder) Skipf(string, ...any) {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

// runRule runs one rule's check against x and returns its failure messages, and whether
// it skipped.
func runRule(r rule, x duework.Index) ([]string, bool) {
	rec := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.check(&suite{t: rec, x: x, rule: r.text})
	}()
	<-done
	return rec.msgs, rec.skipped
}

// broken wraps Memory and breaks one rule of the contract at the API level.
type broken struct {
	*duework.Memory
	noMore, noServed, limitPlusOne, leakyGet, ignoreTokens, vagueErrors, doubleClaims bool
	byUserID, noHolds, releaseAny, noNext, turnIsDue, allOrNothing                    bool

	mu    sync.Mutex
	holds []time.Time // every Now+Hold handed out, for releaseAny
}

func (b *broken) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	if b.noHolds {
		q.Hold = 0
	}
	if b.releaseAny && q.Hold > 0 {
		b.mu.Lock()
		b.holds = append(b.holds, q.Now.Add(q.Hold))
		b.mu.Unlock()
	}
	p, err := b.Memory.Ready(ctx, q)
	for i := range p.Heads {
		h := &p.Heads[i]
		if b.noMore {
			h.More = false
		}
		if b.noServed {
			h.LastServed = time.Time{}
		}
		if b.turnIsDue {
			h.Turn = h.Due[0].DueAt
		}
	}
	if b.byUserID {
		slices.SortFunc(p.Heads, func(x, y duework.Head) int { return cmp.Compare(x.UserID, y.UserID) })
	}
	if b.noNext {
		p.Next = time.Time{}
	}
	return p, err
}

func (b *broken) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	if !b.releaseAny {
		return b.Memory.Release(ctx, userIDs, heldUntil)
	}
	b.mu.Lock()
	holds := slices.Clone(b.holds)
	b.mu.Unlock()
	for _, h := range append(holds, heldUntil) {
		if err := b.Memory.Release(ctx, userIDs, h); err != nil {
			return err
		}
	}
	return nil
}

func (b *broken) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if b.vagueErrors && limit < 1 {
		return nil, fmt.Errorf("bad: %w", duework.ErrInvalid)
	}
	if b.limitPlusOne {
		limit++
	}
	return b.Memory.DueBefore(ctx, now, limit)
}

func (b *broken) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	e, err := b.Memory.Get(ctx, tc, workKey)
	if b.leakyGet && errors.Is(err, duework.ErrNotFound) {
		alice, _ := tenancy.NewContext("alice")
		return b.Memory.Get(ctx, alice, workKey)
	}
	return e, err
}

func (b *broken) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	err := b.Memory.Complete(ctx, tc, c, next)
	if b.ignoreTokens && errors.Is(err, duework.ErrClaimLost) {
		return b.Memory.Schedule(ctx, tc, next)
	}
	return err
}

// CompleteMany, all or nothing: when any item would fail, it writes none of them.
func (b *broken) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	if b.allOrNothing {
		seen := map[duework.Key]bool{}
		for _, d := range done {
			k := d.Claim.Entry.Key()
			if duework.ValidateCompletion(d.Tenant, d.Claim, d.Next) != nil || seen[k] || b.CheckClaim(ctx, d.Tenant, d.Claim) != nil {
				errs := make([]error, len(done))
				for i := range errs {
					errs[i] = duework.ErrClaimLost
				}
				return errs, nil
			}
			seen[k] = true
		}
	}
	return b.Memory.CompleteMany(ctx, done)
}

func (b *broken) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	cs, err := b.Memory.Claim(ctx, keys, now, until)
	if b.doubleClaims {
		cs = append(cs, cs...)
	}
	return cs, err
}

// TestSuiteCatchesBrokenIndexes checks that the suite fails an index that breaks a rule, and
// that the failure cites that rule — and that it passes Memory on every rule.
func TestSuiteCatchesBrokenIndexes(t *testing.T) {
	byName := map[string]rule{}
	for _, r := range rules {
		byName[r.name] = r
	}
	for name, r := range byName {
		if msgs, skipped := runRule(r, duework.NewMemory()); len(msgs) > 0 || skipped {
			t.Errorf("%s fails on Memory (skipped %v): %s", name, skipped, strings.Join(msgs, "\n"))
		}
	}
	for _, c := range []struct {
		name  string
		index *broken
		rules []string
	}{
		{"More never set", &broken{noMore: true}, []string{"ReadyPerUser"}},
		{"LastServed dropped", &broken{noServed: true}, []string{"LastServed", "TurnIsLaterOfReadyAtAndLastServed"}},
		{"one entry too many", &broken{limitPlusOne: true}, []string{"DueBeforeLimit"}},
		{"Get leaks alice's entries", &broken{leakyGet: true}, []string{"IsolationGet"}},
		{"stale claims complete", &broken{ignoreTokens: true}, []string{"CompleteStale", "CompleteForged", "Complete", "ScheduleEndsClaim", "UnscheduleClaimed"}},
		{"errors without the field", &broken{vagueErrors: true}, []string{"BadArguments"}},
		{"each claim handed out twice", &broken{doubleClaims: true}, []string{"ClaimSkips", "ParallelClaimers", "InvalidKeysSkipped"}},
		{"turn order ignored", &broken{byUserID: true}, []string{"TurnOrder", "ServedGoesToTheBack", "ReadyUsers"}},
		{"Turn reported as the first DueAt", &broken{turnIsDue: true}, []string{"TurnIsLaterOfReadyAtAndLastServed", "ReadyAtWithClaims"}},
		{"holds ignored", &broken{noHolds: true}, []string{"HoldHides", "ReleaseEndsHold", "ClaimEndsHold", "ParallelReaders", "ReadyNext"}},
		{"Release ends any hold", &broken{releaseAny: true}, []string{"ReleaseEndsHold"}},
		{"Next never set", &broken{noNext: true}, []string{"ReadyNext"}},
		{"CompleteMany all or nothing", &broken{allOrNothing: true}, []string{"CompleteMany", "CompleteManyRetry"}},
	} {
		for _, name := range c.rules {
			c.index.Memory = duework.NewMemory()
			c.index.holds = nil
			msgs, _ := runRule(byName[name], c.index)
			if len(msgs) == 0 {
				t.Errorf("%s: rule %s passed an index whose %s", name, name, c.name)
				continue
			}
			if cite := fmt.Sprintf("rule %q broken", byName[name].text); !strings.Contains(msgs[0], cite) {
				t.Errorf("%s: the failure %q does not cite the rule", name, msgs[0])
			}
		}
	}
}

// plain is an Index with none of the optional capabilities.
type plain struct{ duework.Index }

// TestOptionalRulesSkip checks that the rules of the optional capabilities skip an Index
// that does not implement them, and run for one that does.
func TestOptionalRulesSkip(t *testing.T) {
	for _, r := range rules {
		if r.name != "ScheduleMissing" && r.name != "ClaimGuard" {
			continue
		}
		if msgs, skipped := runRule(r, plain{duework.NewMemory()}); !skipped || len(msgs) > 0 {
			t.Errorf("%s on an Index without the capability: skipped %v, failures %q", r.name, skipped, msgs)
		}
	}
}

func TestRulesHaveUniqueNames(t *testing.T) {
	seen := map[string]bool{}
	for _, line := range Rules() {
		name, text, ok := strings.Cut(line, ": ")
		if !ok || name == "" || text == "" || seen[name] {
			t.Errorf("bad or repeated rule line %q", line)
		}
		seen[name] = true
	}
}
