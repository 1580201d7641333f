package indextest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
)

// model is the reference Index: a map and a sort, written straight from the contract.
type model struct {
	rows   map[duework.Key]*row
	served map[string]time.Time
	tokens map[duework.Key]map[uint64]bool // every token ever handed out, per entry
}

type row struct {
	e       duework.Entry
	claimed bool
	token   uint64
	until   time.Time
}

func newModel() *model {
	return &model{rows: map[duework.Key]*row{}, served: map[string]time.Time{}, tokens: map[duework.Key]map[uint64]bool{}}
}

// visible reports whether r is due and unclaimed at now.
func (r *row) visible(now time.Time) bool {
	return !r.e.DueAt.After(now) && (!r.claimed || !r.until.After(now))
}

// due returns the visible entries at now in DueBefore's order.
func (m *model) due(now time.Time) []duework.Entry {
	var out []duework.Entry
	for _, r := range m.rows {
		if r.visible(now) {
			out = append(out, r.e)
		}
	}
	sortDue(out)
	return out
}

func (m *model) dueHeads(now time.Time, perUser int) []duework.Head {
	byUser := map[string][]duework.Entry{}
	for _, e := range m.due(now) {
		byUser[e.UserID] = append(byUser[e.UserID], e)
	}
	var heads []duework.Head
	for u, es := range byUser {
		heads = append(heads, duework.Head{UserID: u, LastServed: m.served[u], Due: es[:min(perUser, len(es))], More: len(es) > perUser})
	}
	slices.SortFunc(heads, func(a, b duework.Head) int { return strings.Compare(a.UserID, b.UserID) })
	return heads
}

const modelRule = "the Index agrees with a reference model (a map and a sort) over any sequence of calls"

// stateMachine runs at least MinSequences generated sequences of at most 30 calls, each on a
// fresh index from newIndex, comparing every result with the model.
func stateMachine(t *testing.T, newIndex func(t *testing.T) duework.Index) {
	var runs atomic.Int64
	for batch := 0; runs.Load() < MinSequences; batch++ {
		before := runs.Load()
		ok := t.Run(fmt.Sprintf("batch%d", batch), func(bt *testing.T) {
			rapid.Check(bt, func(rt *rapid.T) {
				runs.Add(1)
				x := newIndex(bt)
				if x == nil {
					rt.Fatalf("newIndex returned nil")
				}
				runSequence(rt, x)
			})
		})
		if !ok {
			return
		}
		if runs.Load() == before {
			t.Fatalf("rapid ran no sequences (is -rapid.checks 0?); the rule needs %d", MinSequences)
		}
	}
}

var (
	genUser = rapid.SampledFrom([]string{"amy", "bo", "cy"})
	genWork = rapid.SampledFrom([]string{"a", "b", "c", "d"})
	genKey  = rapid.Custom(func(t *rapid.T) duework.Key {
		return duework.Key{UserID: genUser.Draw(t, "user"), WorkKey: genWork.Draw(t, "work")}
	})
	// Instants are whole seconds in a small window, so that ties are common, plus now and
	// then a microsecond.
	genAt = rapid.Custom(func(t *rapid.T) time.Time {
		return at(rapid.IntRange(-10, 30).Draw(t, "s")).Add(time.Duration(rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "µs")) * time.Microsecond)
	})
	genEntry = rapid.Custom(func(t *rapid.T) duework.Entry {
		k := genKey.Draw(t, "key")
		e := duework.Entry{
			UserID: k.UserID, WorkKey: k.WorkKey,
			Tier:       rapid.SampledFrom([]string{"hot", "cold", ""}).Draw(t, "tier"),
			DueAt:      genAt.Draw(t, "due"),
			MissStreak: rapid.IntRange(0, 3).Draw(t, "streak"),
		}
		if rapid.Bool().Draw(t, "ran") {
			e.LastRunAt = genAt.Draw(t, "last")
		}
		return e
	})
)

// runSequence drives x and a model with the same calls and compares every answer.
func runSequence(t *rapid.T, x duework.Index) {
	m := newModel()
	var claims []duework.Claim
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("rule %q broken: %s", modelRule, fmt.Sprintf(format, args...))
	}
	ops := map[string]func(){
		"Schedule": func() {
			e := genEntry.Draw(t, "entry")
			if err := x.Schedule(bg, tenant(t, e.UserID), e); err != nil {
				fail("Schedule(%s): %v", show(e), err)
			}
			m.rows[e.Key()] = &row{e: e}
		},
		"Unschedule": func() {
			k := genKey.Draw(t, "key")
			if err := x.Unschedule(bg, tenant(t, k.UserID), k.WorkKey); err != nil {
				fail("Unschedule(%v): %v", k, err)
			}
			delete(m.rows, k)
		},
		"Get": func() {
			k := genKey.Draw(t, "key")
			got, err := x.Get(bg, tenant(t, k.UserID), k.WorkKey)
			r, ok := m.rows[k]
			switch {
			case !ok && !errors.Is(err, duework.ErrNotFound):
				fail("Get(%v) = %s, %v; want duework.ErrNotFound", k, show(got), err)
			case ok && err != nil:
				fail("Get(%v): %v, want %s", k, err, show(r.e))
			case ok && !sameEntry(got, r.e):
				fail("Get(%v) = %s, want %s", k, show(got), show(r.e))
			}
		},
		"DueBefore": func() {
			now, limit := genAt.Draw(t, "now"), rapid.IntRange(1, 8).Draw(t, "limit")
			got, err := x.DueBefore(bg, now, limit)
			if err != nil {
				fail("DueBefore: %v", err)
			}
			want := m.due(now)
			want = want[:min(limit, len(want))]
			if !sameEntries(got, want) {
				fail("DueBefore(t0%+v, %d) =\n%s\nwant\n%s", now.Sub(t0), limit, showAll(got), showAll(want))
			}
		},
		"DueHeads": func() {
			now, perUser := genAt.Draw(t, "now"), rapid.IntRange(1, 3).Draw(t, "perUser")
			got, err := x.DueHeads(bg, now, perUser)
			if err != nil {
				fail("DueHeads: %v", err)
			}
			if want := m.dueHeads(now, perUser); !sameHeads(got, want) {
				fail("DueHeads(t0%+v, %d) =\n%s\nwant\n%s", now.Sub(t0), perUser, showHeads(got), showHeads(want))
			}
		},
		"Claim": func() {
			keys := rapid.SliceOfN(genKey, 0, 5).Draw(t, "keys")
			now := genAt.Draw(t, "now")
			until := now.Add(time.Duration(rapid.IntRange(1, 15).Draw(t, "for")) * time.Second)
			got, err := x.Claim(bg, keys, now, until)
			if err != nil {
				fail("Claim: %v", err)
			}
			var want []duework.Entry
			for _, k := range keys {
				if r, ok := m.rows[k]; ok && r.visible(now) {
					want = append(want, r.e)
					r.claimed, r.until = true, until // a repeated key is no longer visible
				}
			}
			gotEntries := make([]duework.Entry, len(got))
			for i, c := range got {
				gotEntries[i] = c.Entry
			}
			if !sameEntries(gotEntries, want) {
				fail("Claim(%v, t0%+v) claimed\n%s\nwant\n%s", keys, now.Sub(t0), showAll(gotEntries), showAll(want))
			}
			for _, c := range got {
				k := c.Entry.Key()
				if !c.Until.Equal(until) {
					fail("claim of %v has Until %v, want %v", k, c.Until, until)
				}
				if m.tokens[k][c.Token] {
					fail("claim of %v has token %d, which an earlier claim of it had", k, c.Token)
				}
				if m.tokens[k] == nil {
					m.tokens[k] = map[uint64]bool{}
				}
				m.tokens[k][c.Token] = true
				m.rows[k].token = c.Token
				m.served[k.UserID] = now
			}
			claims = append(claims, got...)
		},
		"Complete": func() {
			if len(claims) == 0 {
				return
			}
			c := rapid.SampledFrom(claims).Draw(t, "claim")
			next := genEntry.Draw(t, "next")
			next.UserID, next.WorkKey = c.Entry.UserID, c.Entry.WorkKey
			err := x.Complete(bg, tenant(t, c.Entry.UserID), c, next)
			r, ok := m.rows[c.Entry.Key()]
			if current := ok && r.claimed && r.token == c.Token; current {
				if err != nil {
					fail("Complete of %v with its current claim #%d: %v", c.Entry.Key(), c.Token, err)
				}
				m.rows[next.Key()] = &row{e: next}
			} else if !errors.Is(err, duework.ErrClaimLost) {
				fail("Complete of %v with a claim #%d that is not its current one: %v, want duework.ErrClaimLost", c.Entry.Key(), c.Token, err)
			}
		},
	}
	names := make([]string, 0, len(ops))
	for name := range ops {
		names = append(names, name)
	}
	slices.Sort(names)
	genOp := rapid.SampledFrom(names)
	for range rapid.IntRange(1, 30).Draw(t, "calls") {
		ops[genOp.Draw(t, "call")]()
	}
}
