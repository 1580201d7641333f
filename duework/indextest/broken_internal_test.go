package indextest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// recorder is a tb that records failures instead of failing the test; Fatalf ends the
// goroutine like testing.T's does.
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

// runRule runs one rule's check against x and returns its failure messages.
func runRule(r rule, x duework.Index) []string {
	rec := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.check(&suite{t: rec, x: x, rule: r.text})
	}()
	<-done
	return rec.msgs
}

// broken wraps Memory and breaks one rule of the contract at the API level.
type broken struct {
	*duework.Memory
	noMore, noServed, limitPlusOne, leakyGet, ignoreTokens, vagueErrors, doubleClaims bool
}

func (b *broken) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	p, err := b.Memory.Ready(ctx, q)
	hs := p.Heads
	for i := range hs {
		if b.noMore {
			hs[i].More = false
		}
		if b.noServed {
			hs[i].LastServed = time.Time{}
		}
	}
	return p, err
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
	byName["ParallelClaimers"] = rule{"ParallelClaimers", parallelRule, parallelClaimers}
	for name, r := range byName {
		if msgs := runRule(r, duework.NewMemory()); len(msgs) > 0 {
			t.Errorf("%s fails on Memory: %s", name, strings.Join(msgs, "\n"))
		}
	}
	for _, c := range []struct {
		name  string
		index *broken
		rules []string
	}{
		{"More never set", &broken{noMore: true}, []string{"DueHeadsOrder", "DueHeadsMore"}},
		{"LastServed dropped", &broken{noServed: true}, []string{"LastServed"}},
		{"one entry too many", &broken{limitPlusOne: true}, []string{"DueBeforeLimit"}},
		{"Get leaks alice's entries", &broken{leakyGet: true}, []string{"IsolationGet"}},
		{"stale claims complete", &broken{ignoreTokens: true}, []string{"CompleteStale", "CompleteForged", "Complete", "ScheduleEndsClaim", "UnscheduleClaimed"}},
		{"errors without the field", &broken{vagueErrors: true}, []string{"BadInput"}},
		{"each claim handed out twice", &broken{doubleClaims: true}, []string{"ClaimSkips", "ParallelClaimers"}},
	} {
		for _, name := range c.rules {
			c.index.Memory = duework.NewMemory()
			msgs := runRule(byName[name], c.index)
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
