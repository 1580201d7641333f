package postgres

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
)

// A batch sends each (key, token) once — and (key, token, Until) for StartClaims — and
// repeats of an earlier item are settled as it is, whether or not two items share a token
// with different keys or Untils (forged, or another Index's claims).
func TestClaimItemsSendEachClaimOnce(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	claim := func(user, work string, token uint64, until time.Time) duework.Claim {
		return duework.Claim{Entry: duework.Entry{UserID: user, WorkKey: work}, Token: token, Until: until}
	}
	later := t0.Add(time.Minute)
	items := []duework.Claim{
		claim("u", "a", 7, t0),    // 0: sent
		claim("u", "b", 7, t0),    // 1: same token, another key: sent
		claim("u", "a", 7, t0),    // 2: repeats 0
		claim("u", "b", 7, t0),    // 3: repeats 1
		claim("u", "a", 8, t0),    // 4: another token: sent
		claim("u", "a", 7, later), // 5: repeats 0, or with byUntil is sent
		claim("u", "a", 7, later), // 6: repeats 0, or with byUntil repeats 5
	}
	for _, tc := range []struct {
		byUntil bool
		sent    []int
		dups    map[int]int
	}{
		{false, []int{0, 1, 4}, map[int]int{2: 0, 3: 1, 5: 0, 6: 0}},
		{true, []int{0, 1, 4, 5}, map[int]int{2: 0, 3: 1, 6: 5}},
	} {
		ci := newClaimItems("test", len(items), tc.byUntil)
		for i, c := range items {
			ci.add(i, c, nil)
		}
		if !slices.Equal(ci.ords, tc.sent) {
			t.Errorf("byUntil %v: sent %v; want %v", tc.byUntil, ci.ords, tc.sent)
		}
		if len(ci.dups) != len(tc.dups) {
			t.Errorf("byUntil %v: repeats %v; want %v", tc.byUntil, ci.dups, tc.dups)
		}
		for i, first := range tc.dups {
			if ci.dups[i] != first {
				t.Errorf("byUntil %v: item %d repeats %d; want %d", tc.byUntil, i, ci.dups[i], first)
			}
		}
		for j, i := range ci.ords {
			if k := ci.keyOf(j); k.key != items[i].Entry.Key() || k.token != int64(items[i].Token) {
				t.Errorf("byUntil %v: row %d is %+v; want item %d", tc.byUntil, j, k, i)
			}
		}
		errs := ci.settle(false, func(i int) duework.Claim { return items[i] })
		for i := range tc.dups {
			if !errors.Is(errs[i], duework.ErrClaimLost) {
				t.Errorf("byUntil %v: repeated item %d settled as %v; want ErrClaimLost", tc.byUntil, i, errs[i])
			}
		}
	}
}
