package localstart_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func claim(work string, token uint64, until time.Time) duework.Claim {
	return duework.Claim{Entry: duework.Entry{UserID: "amy", WorkKey: work}, Token: token, Until: until}
}

func TestTakeOnce(t *testing.T) {
	now := t0
	s := localstart.New(func() time.Time { return now })
	a, b := claim("a", 1, t0.Add(time.Minute)), claim("b", 2, t0.Add(time.Minute))
	s.Add(t0, []duework.Claim{a, b})
	if mine, live := s.Take(a); !mine || !live {
		t.Fatalf("first Take of a = %v, %v; want mine and live", mine, live)
	}
	if mine, _ := s.Take(a); mine {
		t.Fatal("second Take of a found it mine")
	}
	// The claim is one (key, token, Until): another token, key or Until is not it, and an
	// Until in another location is.
	for _, other := range []duework.Claim{claim("b", 3, b.Until), claim("c", 2, b.Until), claim("b", 2, b.Until.Add(time.Microsecond))} {
		if mine, _ := s.Take(other); mine {
			t.Fatalf("Take of %+v found it mine", other)
		}
	}
	if mine, _ := s.Take(claim("b", 2, b.Until.In(time.FixedZone("x", 3600)))); !mine {
		t.Fatal("Take of b with its Until in another location did not find it")
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after every claim was taken, want 0", s.Len())
	}
}

// A claim's end is on the Set's clock: Until − the Claim's now after the Add, so a Claim's
// time line far from the clock's still gets its full claim.
func TestLiveOnTheSetsClock(t *testing.T) {
	clock := t0.Add(1000 * time.Hour)
	s := localstart.New(func() time.Time { return clock })
	a, b := claim("a", 1, t0.Add(time.Minute)), claim("b", 2, t0.Add(time.Minute))
	s.Add(t0, []duework.Claim{a, b})
	clock = clock.Add(time.Minute - time.Nanosecond)
	if mine, live := s.Take(a); !mine || !live {
		t.Fatalf("Take of a a nanosecond before its end = %v, %v; want mine and live", mine, live)
	}
	clock = clock.Add(time.Nanosecond)
	if mine, live := s.Take(b); !mine || live {
		t.Fatalf("Take of b at its end = %v, %v; want mine and not live", mine, live)
	}
	// Return gives a claim back as ended.
	s.Return([]duework.Claim{a})
	if mine, live := s.Take(a); !mine || live {
		t.Fatalf("Take of a returned claim = %v, %v; want mine and not live", mine, live)
	}
}

func TestNilSet(t *testing.T) {
	var s *localstart.Set
	s.Add(t0, []duework.Claim{claim("a", 1, t0)})
	s.Return([]duework.Claim{claim("a", 1, t0)})
	if mine, live := s.Take(claim("a", 1, t0)); mine || live || s.Len() != 0 {
		t.Fatal("a nil Set holds something")
	}
	if localstart.From(context.Background()) != nil {
		t.Fatal("From of a context without a Set is not nil")
	}
	set := localstart.New(time.Now)
	if localstart.From(localstart.With(context.Background(), set)) != set {
		t.Fatal("From does not return the Set With put on the context")
	}
}

func TestConcurrentTakes(t *testing.T) {
	s := localstart.New(func() time.Time { return t0 })
	cs := make([]duework.Claim, 100)
	for i := range cs {
		cs[i] = claim(fmt.Sprint(i), uint64(i+1), t0.Add(time.Minute))
	}
	s.Add(t0, cs)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		mine = map[int]int{}
	)
	for range 8 {
		wg.Go(func() {
			for i, c := range cs {
				if m, _ := s.Take(c); m {
					mu.Lock()
					mine[i]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i := range cs {
		if mine[i] != 1 {
			t.Fatalf("claim %d found mine %d times by 8 takers, want once", i, mine[i])
		}
	}
}

// TestSetAgainstModel runs random Adds, Takes, Returns and clock moves against a map:
// Take finds a claim mine only if it was Added (or Returned) and not Taken since, live
// exactly when the clock is before its end; the Set may drop a claim only once it has
// ended.
func TestSetAgainstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := t0
		s := localstart.New(func() time.Time { return clock })
		model := map[duework.Claim]time.Time{} // each claim held, and its end on the clock
		var made []duework.Claim
		token := uint64(0)
		rt.Repeat(map[string]func(*rapid.T){
			"Add": func(rt *rapid.T) {
				now := t0.Add(time.Duration(rapid.IntRange(-100, 100).Draw(rt, "now")) * time.Second)
				n := rapid.IntRange(1, 700).Draw(rt, "n")
				cs := make([]duework.Claim, n)
				for i := range cs {
					token++
					cs[i] = claim(fmt.Sprint(token%50), token, now.Add(time.Duration(rapid.IntRange(1, 60).Draw(rt, "for"))*time.Second))
					model[cs[i]] = clock.Add(cs[i].Until.Sub(now))
				}
				made = append(made, cs...)
				s.Add(now, cs)
			},
			"Take": func(rt *rapid.T) {
				if len(made) == 0 {
					rt.Skip("nothing made")
				}
				c := rapid.SampledFrom(made).Draw(rt, "claim")
				end, held := model[c]
				delete(model, c)
				mine, live := s.Take(c)
				switch {
				case mine && !held:
					rt.Fatalf("Take of %v found it mine, not held", c)
				case held && !mine && clock.Before(end):
					rt.Fatalf("Take of %v, live until %v, at %v missed it", c, end, clock)
				case mine && live != clock.Before(end):
					rt.Fatalf("Take of %v at %v, ending %v: live %v", c, clock, end, live)
				}
			},
			"Return": func(rt *rapid.T) {
				if len(made) == 0 {
					rt.Skip("nothing made")
				}
				c := rapid.SampledFrom(made).Draw(rt, "claim")
				model[c] = time.Time{}
				s.Return([]duework.Claim{c})
			},
			"Tick": func(rt *rapid.T) {
				clock = clock.Add(time.Duration(rapid.IntRange(0, 30).Draw(rt, "d")) * time.Second)
			},
		})
		if s.Len() > len(model) {
			rt.Fatalf("the Set holds %d claims, more than the %d held", s.Len(), len(model))
		}
	})
}
