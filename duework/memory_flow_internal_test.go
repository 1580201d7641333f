package duework

import (
	"math"
	"math/big"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// stored times and durations as exact nanoseconds since vocab.MinTime, the reference the flow
// arithmetic is checked against.
func exact(sec int64, nsec int32) *big.Int {
	n := new(big.Int).Mul(big.NewInt(sec), big.NewInt(nanosPerSec))
	return n.Add(n, big.NewInt(int64(nsec)))
}

func fromExact(n *big.Int) (int64, int32) {
	if n.Sign() < 0 {
		return 0, 0
	}
	if n.Cmp(exact(maxSec, maxNsec)) > 0 {
		return maxSec, maxNsec
	}
	s, ns := new(big.Int).QuoRem(n, big.NewInt(nanosPerSec), new(big.Int))
	return s.Int64(), int32(ns.Int64())
}

var (
	// genStored draws a stored time anywhere in [vocab.MinTime, vocab.MaxTime], near either end often.
	genStored = rapid.Custom(func(t *rapid.T) [2]int64 {
		sec := rapid.OneOf(rapid.Int64Range(0, maxSec), rapid.Int64Range(0, 100), rapid.Int64Range(maxSec-100, maxSec)).Draw(t, "sec")
		nsec := rapid.OneOf(rapid.Int64Range(0, nanosPerSec-1), rapid.SampledFrom([]int64{0, 999_999_999})).Draw(t, "nsec")
		if sec == maxSec {
			nsec = min(nsec, int64(maxNsec))
		}
		return [2]int64{sec, nsec}
	})
	genEvery = rapid.OneOf(rapid.Int64Range(1, 1000), rapid.Int64Range(1, int64(time.Hour)), rapid.Int64Range(1, math.MaxInt64),
		rapid.SampledFrom([]int64{1, int64(time.Second), math.MaxInt64}))
	genK = rapid.OneOf(rapid.IntRange(0, 10), rapid.IntRange(0, MaxLimit), rapid.SampledFrom([]int{MaxLimit}))
)

// TestFlowArithmetic checks Memory's saturating arithmetic on stored times against exact
// integers, over the whole range of times, Every and k.
func TestFlowArithmetic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genStored.Draw(t, "a")
		as, an := a[0], int32(a[1])
		e := time.Duration(genEvery.Draw(t, "every"))
		k := genK.Draw(t, "k")
		ke := new(big.Int).Mul(big.NewInt(int64(k)), big.NewInt(int64(e)))

		ws, wn := fromExact(new(big.Int).Add(exact(as, an), ke))
		if gs, gn := addScaled(as, an, int64(k), e); gs != ws || gn != wn {
			t.Fatalf("addScaled(%d.%09d, %d, %v) = %d.%09d, want %d.%09d", as, an, k, e, gs, gn, ws, wn)
		}
		ws, wn = fromExact(new(big.Int).Sub(exact(as, an), ke))
		if gs, gn := subScaled(as, an, int64(k), e); gs != ws || gn != wn {
			t.Fatalf("subScaled(%d.%09d, %d, %v) = %d.%09d, want %d.%09d", as, an, k, e, gs, gn, ws, wn)
		}

		// allowance: b when R <= now, else max(0, b − ceil((R − now)/e)).
		r := genStored.Draw(t, "mark")
		b := max(1, genK.Draw(t, "b"))
		want := b
		if d := new(big.Int).Sub(exact(r[0], int32(r[1])), exact(as, an)); d.Sign() > 0 {
			q := new(big.Int).Div(d.Add(d, big.NewInt(int64(e)-1)), big.NewInt(int64(e)))
			if want = 0; q.Cmp(big.NewInt(int64(b))) < 0 {
				want = b - int(q.Int64())
			}
		}
		if got := allowance(r[0], int32(r[1]), as, an, e, b); got != want {
			t.Fatalf("allowance(mark %v, now %v, %v, %d) = %d, want %d", r, a, e, b, got, want)
		}
	})
}

// TestStrided checks the stride, T + floor(L·k/w) µs with L = now − T in whole
// microseconds rounded down, against exact integers, for T before now anywhere in range.
func TestStrided(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x, y := genStored.Draw(t, "x"), genStored.Draw(t, "y")
		if cmpTime(x[0], int32(x[1]), y[0], int32(y[1])) >= 0 {
			t.Skip("T not before now")
		}
		w := rapid.IntRange(2, MaxWeight).Draw(t, "w")
		k := rapid.IntRange(1, w-1).Draw(t, "k")
		tt, now := exact(x[0], int32(x[1])), exact(y[0], int32(y[1]))
		micro := big.NewInt(int64(time.Microsecond))
		l := new(big.Int).Div(new(big.Int).Sub(now, tt), micro)
		s := new(big.Int).Div(l.Mul(l, big.NewInt(int64(k))), big.NewInt(int64(w)))
		ws, wn := fromExact(s.Add(tt, s.Mul(s, micro)))
		if gs, gn := strided(x[0], int32(x[1]), y[0], int32(y[1]), k, w); gs != ws || gn != wn {
			t.Fatalf("strided(T %v, now %v, k %d, w %d) = %d.%09d, want %d.%09d", x, y, k, w, gs, gn, ws, wn)
		}
		if cmpTime(ws, wn, y[0], int32(y[1])) > 0 {
			t.Fatalf("the stride passed now")
		}
	})
}

// TestTicketsAgainstSortedSlice drives a tree of claims with random inserts and removals
// and checks its order, sizes, in-flight counts and k-th latest ends against a sorted
// slice.
func TestTicketsAgainstSortedSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var root *ticket
		var live []*ticket // in (Until, token) order
		token := uint64(0)
		t.Repeat(map[string]func(*rapid.T){
			"insert": func(t *rapid.T) {
				token++
				n := &node{visSec: rapid.Int64Range(0, 20).Draw(t, "sec"), visNsec: int32(rapid.IntRange(0, 2).Draw(t, "nsec")),
					prio: rapid.Uint32Range(0, 8).Draw(t, "prio")} // many ties
				tk := &ticket{n: n, token: token, prio: n.prio}
				n.claim = tk
				root = byEnd.insert(root, tk)
				i, _ := slices.BinarySearchFunc(live, tk, func(a, b *ticket) int {
					if ticketBefore(a, b) {
						return -1
					}
					return 1
				})
				live = slices.Insert(live, i, tk)
			},
			"remove": func(t *rapid.T) {
				if len(live) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(live)-1).Draw(t, "i")
				root = byEnd.remove(root, live[i])
				live = slices.Delete(live, i, i+1)
			},
			"": func(t *rapid.T) {
				checkTicketTree(t, root, live)
				sec, nsec := rapid.Int64Range(-1, 21).Draw(t, "now"), int32(rapid.IntRange(0, 2).Draw(t, "nowNsec"))
				want := 0
				for _, tk := range live {
					if cmpTime(tk.n.visSec, tk.n.visNsec, sec, nsec) > 0 {
						want++
					}
				}
				if got := endingAfter(root, sec, nsec); got != want {
					t.Fatalf("endingAfter(%d.%d) = %d, want %d", sec, nsec, got, want)
				}
				for k := 1; k <= len(live)+1; k++ {
					var want *ticket
					if k <= len(live) {
						want = live[len(live)-k]
					}
					if got := latest(root, k); got != want {
						t.Fatalf("latest(%d) of %d is not the %d-th from the end", k, len(live), k)
					}
				}
			},
		})
	})
}

// checkTicketTree fails unless the tree at root holds exactly live, in order, with heap
// priorities and true sizes.
func checkTicketTree(t *rapid.T, root *ticket, live []*ticket) {
	var got []*ticket
	var walk func(tk *ticket) int32
	walk = func(tk *ticket) int32 {
		if tk == nil {
			return 0
		}
		for _, k := range tk.kid {
			if k != nil && k.prio > tk.prio {
				t.Fatalf("a child has a higher priority than its parent")
			}
		}
		l := walk(tk.kid[0])
		got = append(got, tk)
		r := walk(tk.kid[1])
		if tk.size != 1+l+r {
			t.Fatalf("size %d, want %d", tk.size, 1+l+r)
		}
		return tk.size
	}
	walk(root)
	if !slices.Equal(got, live) {
		t.Fatalf("the tree holds %d claims out of order or not those inserted, want %d", len(got), len(live))
	}
}
