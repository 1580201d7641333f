package indextest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/tenancy"
)

// localMem is Memory taking part in local starts as the postgres Index does: Claim under a
// Set starts its claims and puts them in the Set, StartClaims under it starts a live claim
// it Takes without asking Memory and one past its end if still current, and Unclaim hands
// back the claims it Takes, started or not. Each flag breaks one of those.
type localMem struct {
	*duework.Memory
	twice      bool // StartClaims hands a claim of the Set out again
	unmarked   bool // Claim leaves the claims of the Set unstarted for everyone else
	endless    bool // StartClaims starts a claim of the Set past its end without asking
	noHandBack bool // Unclaim refuses the holder's unstarted claims
}

func (m *localMem) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	cs, err := m.Memory.Claim(ctx, keys, now, until)
	set := localstart.From(ctx)
	if err != nil || set == nil || len(cs) == 0 {
		return cs, err
	}
	if !m.unmarked {
		if _, err := m.Memory.StartClaims(ctx, items(cs)); err != nil {
			return nil, err
		}
	}
	set.Add(now, cs)
	return cs, nil
}

func (m *localMem) StartClaims(ctx context.Context, us []duework.Unclaim) ([]error, error) {
	set := localstart.From(ctx)
	errs := make([]error, len(us))
	var (
		rest  []duework.Unclaim
		where []int
		mine  []bool
	)
	for i, u := range us {
		var my, live bool
		if u.Validate() == nil {
			my, live = set.Take(u.Claim)
			if my && m.twice {
				set.Return([]duework.Claim{u.Claim})
			}
		}
		if live || my && m.endless {
			continue
		}
		rest, where, mine = append(rest, u), append(where, i), append(mine, my)
	}
	got, err := m.Memory.StartClaims(ctx, rest)
	if err != nil {
		return nil, err
	}
	for k, i := range where {
		errs[i] = got[k]
		if mine[k] && errors.Is(got[k], duework.ErrClaimStarted) {
			errs[i] = nil // started by its Claim, current, and the holder's
		}
	}
	return errs, nil
}

func (m *localMem) Unclaim(ctx context.Context, us []duework.Unclaim) ([]error, error) {
	set := localstart.From(ctx)
	errs := make([]error, len(us))
	var (
		rest  []duework.Unclaim
		where []int
	)
	for i, u := range us {
		if my, _ := set.Take(u.Claim); my && !m.noHandBack && u.Validate() == nil {
			errs[i] = m.Memory.Complete(ctx, u.Tenant, u.Claim, u.Claim.Entry) // ends the started claim as it was
			continue
		}
		rest, where = append(rest, u), append(where, i)
	}
	got, err := m.Memory.Unclaim(ctx, rest)
	if err != nil {
		return nil, err
	}
	for k, i := range where {
		errs[i] = got[k]
	}
	return errs, nil
}

func (m *localMem) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	localstart.From(ctx).Take(c)
	return m.Memory.Complete(ctx, tc, c, next)
}

func (m *localMem) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	for _, d := range done {
		localstart.From(ctx).Take(d.Claim)
	}
	return m.Memory.CompleteMany(ctx, done)
}

// items are the Unclaims of cs, each under its own user's Context.
func items(cs []duework.Claim) []duework.Unclaim {
	us := make([]duework.Unclaim, len(cs))
	for i, c := range cs {
		tc, _ := tenancy.NewContext(c.Entry.UserID)
		us[i] = duework.Unclaim{Tenant: tc, Claim: c}
	}
	return us
}

// TestLocalStartsRules checks the rules of local starts against an index that takes part
// (every rule of the suite must hold for it), and that each breaks on the faults it names.
func TestLocalStartsRules(t *testing.T) {
	for _, r := range rules {
		if msgs, skipped := runRule(r, &localMem{Memory: duework.NewMemory()}); len(msgs) > 0 || skipped {
			t.Errorf("%s fails on Memory taking part in local starts (skipped %v): %s", r.name, skipped, strings.Join(msgs, "\n"))
		}
	}
	cases := []struct {
		name  string
		index *localMem
		rules []string
	}{
		{"a claim of the Set handed out twice", &localMem{twice: true}, []string{"LocalStarts", "ParallelLocalStarters"}},
		{"the claims of the Set unstarted for the others", &localMem{unmarked: true}, []string{"LocalStarts", "ParallelLocalStarters"}},
		{"a claim of the Set started past its end unasked", &localMem{endless: true}, []string{"LocalStartsEnded"}},
		{"the holder's claims not handed back", &localMem{noHandBack: true}, []string{"LocalStarts"}},
	}
	byName := map[string]rule{}
	for _, r := range rules {
		byName[r.name] = r
	}
	for _, c := range cases {
		for _, name := range c.rules {
			c.index.Memory = duework.NewMemory()
			if msgs, _ := runRule(byName[name], c.index); len(msgs) == 0 {
				t.Errorf("rule %s passed an index where %s", name, c.name)
			}
		}
	}
}
