package duework

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// tokenPages agrees with a map from token to ticket over any sequence of claims made in
// token order and ended in any order, holds a page only while it holds a ticket of it, and
// reuses an emptied page for the next new one.
func TestTokenPagesAgreeWithAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var tp tokenPages
		want := map[uint64]*ticket{}
		next := uint64(0)
		t.Repeat(map[string]func(*rapid.T){
			"claim": func(t *rapid.T) {
				next += uint64(rapid.IntRange(1, 300).Draw(t, "gap"))
				tk := &ticket{token: next}
				tp.put(tk)
				want[next] = tk
			},
			"end": func(t *rapid.T) {
				if len(want) == 0 {
					t.Skip("no claims")
				}
				tok := rapid.SampledFrom(slices.Sorted(maps.Keys(want))).Draw(t, "token")
				tp.remove(tok)
				delete(want, tok)
			},
			"get": func(t *rapid.T) {
				tok := rapid.Uint64Range(0, next+300).Draw(t, "token")
				if got := tp.get(tok); got != want[tok] {
					t.Fatalf("get(%d) = %v, want %v", tok, got, want[tok])
				}
			},
			"": func(t *rapid.T) {
				held := 0
				for _, p := range tp.pages {
					held += p.n
				}
				if held != len(want) {
					t.Fatalf("holds %d tickets, want %d", held, len(want))
				}
				got := maps.Collect(tp.all())
				if !maps.Equal(got, want) {
					t.Fatalf("all() = %v, want %v", got, want)
				}
				pages := map[uint64]bool{}
				for tok := range want {
					pages[tok>>tokenPageBits] = true
				}
				if len(tp.pages) != len(pages) {
					t.Fatalf("%d pages for tickets on %d", len(tp.pages), len(pages))
				}
			},
		})
	})
}

func TestTokenPagesReuseAnEmptiedPage(t *testing.T) {
	var tp tokenPages
	tp.put(&ticket{token: 1})
	p := tp.pages[0]
	tp.remove(1)
	if len(tp.pages) != 0 {
		t.Fatalf("%d pages after the last claim ended, want 0", len(tp.pages))
	}
	tp.put(&ticket{token: 1 << tokenPageBits * 5})
	if tp.pages[5] != p {
		t.Error("a new page was allocated while an emptied one was kept")
	}
	tk := &ticket{token: 1 << tokenPageBits * 9}
	if got := testing.AllocsPerRun(100, func() {
		tp.put(tk)
		tp.remove(tk.token)
	}); got != 0 {
		t.Errorf("a claim made and ended on a page of its own allocates %v times, want 0", got)
	}
}
