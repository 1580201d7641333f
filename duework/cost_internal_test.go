package duework

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// countVisits counts the nodes the free trees and the users tree hand out while f runs: the
// reads' work, measured without a clock.
func countVisits(t *testing.T, f func()) int {
	t.Helper()
	visits := 0
	oldFree, oldUser := freeTree, userTree
	t.Cleanup(func() { freeTree, userTree = oldFree, oldUser })
	freeTree.kids = func(n *node) *[2]*node { visits++; return oldFree.kids(n) }
	userTree.kids = func(u *user) *[2]*user { visits++; return oldUser.kids(u) }
	f()
	freeTree, userTree = oldFree, oldUser
	return visits
}

// noisy returns a Memory where user "noisy" holds backlog due entries and 20 other users
// hold one due entry each, plus 1,000 users with nothing due.
func noisy(t *testing.T, backlog int) *Memory {
	t.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := NewMemory()
	put := func(user, key string, due time.Time) {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Schedule(ctx, tc, Entry{UserID: user, WorkKey: key, DueAt: due}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range backlog {
		put("noisy", "k"+strconv.Itoa(i), t0.Add(-time.Duration(i)*time.Second))
	}
	for i := range 20 {
		put("u"+strconv.Itoa(i), "k", t0.Add(-time.Minute))
	}
	for i := range 1000 {
		put("idle"+strconv.Itoa(i), "k", t0.Add(time.Hour))
	}
	return m
}

// TestReadsCostWhatTheyReturn pins Memory's cost rule without timing anything: the nodes
// DueHeads and DueBefore visit do not grow with one user's backlog, nor with the users that
// have nothing due. Walking the backlog would visit 50,000 nodes and walking the idle users
// 1,000; the bounds allow 10 nodes per head for DueHeads and 60 (a few times the treaps'
// expected depth) per entry for DueBefore, where about a third of that is typical.
func TestReadsCostWhatTheyReturn(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for _, read := range []struct {
		name  string
		bound int
		call  func(m *Memory)
	}{
		{"DueHeads(now, 2)", 21 * 10, func(m *Memory) { _, _ = m.DueHeads(ctx, t0, 2) }},
		{"DueBefore(now, 30)", 30 * 60, func(m *Memory) { _, _ = m.DueBefore(ctx, t0, 30) }},
	} {
		small, big := noisy(t, 10), noisy(t, 50_000)
		vs := countVisits(t, func() { read.call(small) })
		vb := countVisits(t, func() { read.call(big) })
		t.Logf("%s: %d, %d", read.name, vs, vb)
		if vb > read.bound || vs > read.bound {
			t.Errorf("%s visited %d nodes with a backlog of 10 and %d with 50,000; the bound is %d", read.name, vs, vb, read.bound)
		}
	}
}
