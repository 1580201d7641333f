package duework

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/internal/vocab"
)

// item is a test node for the treap against a sorted-slice model: key orders it, val is
// its value and least the augmentation, the least val of its subtree.
type item struct {
	key        string
	val, least int
	kid        [2]*item
	prio       uint32
}

// itemOrder orders items by key, bytewise, augmented with least.
type itemOrder struct{}

func (itemOrder) kids(n *item) *[2]*item { return &n.kid }

func (itemOrder) seek(n *item, k string) (int, *[2]*item) { return strings.Compare(k, n.key), &n.kid }

func (itemOrder) sink(at, n *item) (**item, bool) {
	if n.prio > at.prio {
		return nil, false
	}
	at.least = min(at.least, n.val)
	return side(&at.kid, n.key < at.key), true
}

func (itemOrder) toward(at, n *item, leave bool) (**item, bool, bool) {
	stale := leave && at.least == n.val
	before := n.key < at.key
	return side(&at.kid, before), before, stale
}

func (itemOrder) above(a, b *item) bool { return a.prio > b.prio }
func (itemOrder) augmented() bool       { return true }

func (itemOrder) fix(n *item) bool {
	least := n.val
	for _, k := range n.kid {
		if k != nil {
			least = min(least, k.least)
		}
	}
	changed := least != n.least
	n.least = least
	return changed
}

var byItemKey treap[item, itemOrder]

// checkTree verifies a treap's search order, the heap order of its priorities and, when it
// has one, its augmentation (by calling fix on a copy of each node), and returns its nodes
// in order.
func checkTree[N comparable, O order[N]](root *N) ([]*N, error) {
	var o O
	var out []*N
	var walk func(n *N) error
	walk = func(n *N) error {
		if n == nil {
			return nil
		}
		k := o.kids(n)
		for _, c := range k {
			if c != nil && o.above(c, n) {
				return errors.New("a child has a higher priority than its parent")
			}
		}
		if err := walk(k[0]); err != nil {
			return err
		}
		if len(out) > 0 {
			if _, before, _ := o.toward(n, out[len(out)-1], false); !before {
				return errors.New("nodes out of order")
			}
		}
		out = append(out, n)
		if o.augmented() {
			c := *n
			o.fix(&c)
			if c != *n {
				return errors.New("a node's augmentation is stale")
			}
		}
		return walk(k[1])
	}
	return out, walk(root)
}

// itemKey is the key of the item numbered i: its bytewise order is i's.
func itemKey(i int) string { return fmt.Sprintf("%03d", i) }

// TestTreapAgainstSortedSlice drives the treap with random inserts, removals and updates,
// and checks the in-order walk, the augmentation, the cursors, first, find and walkAfter
// against a sorted slice.
func TestTreapAgainstSortedSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var root *item
		nodes := map[string]*item{}
		var model []string // keys in order
		key, val := rapid.IntRange(0, 60), rapid.IntRange(0, 100)
		t.Repeat(map[string]func(*rapid.T){
			"insert": func(t *rapid.T) {
				k := itemKey(key.Draw(t, "key"))
				if nodes[k] != nil {
					t.Skip("present")
				}
				n := &item{key: k, val: val.Draw(t, "val"), prio: rapid.Uint32Range(0, 8).Draw(t, "prio")} // many ties
				nodes[k] = n
				root = byItemKey.insert(root, n)
				i, _ := slices.BinarySearch(model, k)
				model = slices.Insert(model, i, k)
			},
			"remove": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				k := rapid.SampledFrom(model).Draw(t, "key")
				root = byItemKey.remove(root, nodes[k])
				delete(nodes, k)
				i, _ := slices.BinarySearch(model, k)
				model = slices.Delete(model, i, i+1)
			},
			"update": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				n := nodes[rapid.SampledFrom(model).Draw(t, "key")]
				n.val = val.Draw(t, "val")
				byItemKey.update(root, n)
			},
			"cursor": func(t *rapid.T) {
				// A pruning cursor yields, in order, the nodes of every subtree whose least
				// value is at most the bound; those include every node of value <= bound.
				bound := val.Draw(t, "bound")
				c := cursor[item, itemOrder]{prune: func(n *item, b int64, _ int32) bool { return int64(n.least) > b }, sec: int64(bound)}
				c.start(root)
				var got, want []string
				for n := c.next(); n != nil; n = c.next() {
					if n.val <= bound {
						got = append(got, n.key)
					}
				}
				for _, k := range model {
					if nodes[k].val <= bound {
						want = append(want, k)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("cursor with bound %d gave %v, want %v", bound, got, want)
				}
			},
			"find": func(t *rapid.T) {
				k := itemKey(key.Draw(t, "key"))
				if got := find[item, itemOrder](root, k); got != nodes[k] {
					t.Fatalf("find(%s) = %v, want %v", k, got, nodes[k])
				}
				limit := rapid.IntRange(1, 5).Draw(t, "limit")
				var got []string
				walkAfter[item, itemOrder](root, k, func(n *item) bool {
					got = append(got, n.key)
					return len(got) < limit
				})
				i, found := slices.BinarySearch(model, k)
				if found {
					i++
				}
				if want := model[i:min(i+limit, len(model))]; !slices.Equal(got, want) && len(got)+len(want) > 0 {
					t.Fatalf("walkAfter(%s) up to %d gave %v, want %v", k, limit, got, want)
				}
			},
			"": func(t *rapid.T) {
				all, err := checkTree[item, itemOrder](root)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]string, len(all))
				for i, n := range all {
					got[i] = n.key
				}
				if !slices.Equal(got, model) && len(got)+len(model) > 0 {
					t.Fatalf("in-order keys %v, want %v", got, model)
				}
				var c cursor[item, itemOrder]
				c.start(root)
				for _, k := range model {
					if n := c.next(); n != nodes[k] {
						t.Fatalf("cursor gave %v, want %s", n, k)
					}
				}
				if n := c.next(); n != nil {
					t.Fatalf("cursor gave %s past the end", n.key)
				}
				m := byItemKey.first(root)
				if (m == nil) != (len(model) == 0) || (m != nil && m.key != model[0]) {
					t.Fatalf("first = %v, want first of %v", m, model)
				}
			},
		})
	})
}

// check verifies every internal invariant of m: every tree's order, heap priorities and
// augmentation; each user's entries and keys trees holding the same nodes, its first, its
// place in its group's tree (under its Turn) and in byDue exactly when it has entries, its
// tree of claims filing exactly its claimed entries, its pass no later than LastServed and
// its limits valid; each node's visible-at (DueAt unclaimed, after DueAt claimed) and
// token; no empty group kept; the tree of pauses filing exactly the users' pauses, each
// one that counts; the spare tickets unused; and Ready's and Claim's working space left
// empty.
func (m *Memory) check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	inGroups := map[*user]string{}
	for name, root := range m.groups {
		us, err := checkTree[user, groupOrder](root)
		if err != nil || len(us) == 0 {
			return fmt.Errorf("group %q: %d users, %v", name, len(us), err)
		}
		for _, u := range us {
			inGroups[u] = name
		}
	}
	inDue := map[*user]bool{}
	for i := range m.byDue {
		s := &m.byDue[i]
		if s.u.dueAt != i+1 || s.u.first == nil || s.sec != s.u.first.dueSec || s.nsec != s.u.first.dueNsec {
			return fmt.Errorf("byDue: slot %d does not hold user %q at its index under its first DueAt", i, s.u.id)
		}
		if i > 0 && dueBefore(s, &m.byDue[(i-1)/2]) {
			return fmt.Errorf("byDue: slot %d is ordered before its parent", i)
		}
		inDue[s.u] = true
	}
	byDue := m.byDue
	for id, u := range m.users {
		if err := m.checkUser(id, u, inGroups, inDue); err != nil {
			return fmt.Errorf("user %q: %w", id, err)
		}
	}
	for _, r := range m.read {
		if m.readDrops == m.drops && r.u.lookup(r.n.workKey) != r.n {
			return fmt.Errorf("read holds entry %q of user %q, which it no longer has", r.n.workKey, r.u.id)
		}
	}
	for token, h := range m.claims.all() {
		if h.n.claimToken() != token || m.users[h.u.id] != h.u || h.u.lookup(h.n.workKey) != h.n {
			return fmt.Errorf("claims files token %d, which no stored entry has", token)
		}
	}
	if len(inGroups) != len(byDue) {
		return fmt.Errorf("%d users in groups, %d in byDue", len(inGroups), len(byDue))
	}
	if err := m.checkPauses(); err != nil {
		return err
	}
	if len(m.picks)+len(m.queue.stack)+len(m.walk.stack)+len(m.touched) > 0 {
		return errors.New("Ready's or Claim's working space is not empty between calls")
	}
	spares := 0
	for t := m.spare; t != nil; t = t.kid[0] {
		if spares++; t.u != nil || t.n != nil || t.kid[1] != nil || t.size != 0 || spares > maxScratch {
			return fmt.Errorf("spare ticket %d is in use, or there are more than %d", spares, maxScratch)
		}
	}
	if spares != m.spares {
		return fmt.Errorf("%d spare tickets, counted as %d", spares, m.spares)
	}
	return nil
}

// checkPauses verifies Memory.paused: the treap's order by UserID, and that it files
// exactly the users' pauses, each of which counts (a write that ends one drops it).
func (m *Memory) checkPauses() error {
	ps, err := checkTree[pause, pauseOrder](m.paused)
	if err != nil {
		return fmt.Errorf("paused: %w", err)
	}
	filed := 0
	for _, u := range m.users {
		if u.pause != nil {
			filed++
		}
	}
	if filed != len(ps) {
		return fmt.Errorf("%d users have a pause, %d are in paused", filed, len(ps))
	}
	for _, p := range ps {
		if m.users[p.u.id] != p.u || p.u.pause != p || !p.counts() || p.reason == "" {
			return fmt.Errorf("the pause of %q is not its user's, or no longer counts", p.u.id)
		}
	}
	return nil
}

// checkTickets verifies u's tree of claims: the treap's order by (Until, token), its
// priorities (each its node's) and sizes, and that it files exactly u's claimed entries,
// each as m.claims does.
func (m *Memory) checkTickets(u *user, entries []*node) error {
	var filed []*node
	var walk func(t *ticket) (int32, error)
	walk = func(t *ticket) (int32, error) {
		if t == nil {
			return 0, nil
		}
		for _, k := range t.kid {
			if k != nil && k.prio > t.prio {
				return 0, errors.New("a claim has a higher priority than its parent")
			}
		}
		l, err := walk(t.kid[0])
		if err != nil {
			return 0, err
		}
		if len(filed) > 0 && !ticketBefore(&ticket{n: filed[len(filed)-1]}, t) {
			return 0, errors.New("claims out of (Until, token) order")
		}
		if t.u != u || t.n.claim != t || m.claims.get(t.token) != t || t.prio != t.n.prio {
			return 0, fmt.Errorf("the claim of %q is not filed as its user's, under its token, with its priority", t.n.workKey)
		}
		filed = append(filed, t.n)
		r, err := walk(t.kid[1])
		if err != nil {
			return 0, err
		}
		if t.size != 1+l+r {
			return 0, fmt.Errorf("a claim's subtree holds %d, counted as %d", 1+l+r, t.size)
		}
		return t.size, nil
	}
	if _, err := walk(u.claims); err != nil {
		return fmt.Errorf("claims: %w", err)
	}
	var claimed []*node
	for _, n := range entries {
		if n.claim != nil {
			claimed = append(claimed, n)
		}
	}
	if len(claimed) != len(filed) {
		return fmt.Errorf("%d entries claimed, %d in its tree of claims", len(claimed), len(filed))
	}
	for _, n := range claimed {
		if !slices.Contains(filed, n) {
			return fmt.Errorf("claimed entry %q is not in its tree of claims", n.workKey)
		}
	}
	return nil
}

func (m *Memory) checkUser(id string, u *user, inGroups map[*user]string, inDue map[*user]bool) error {
	if u.id != id {
		return fmt.Errorf("filed under %q", u.id)
	}
	tree, err := checkTree[node, entryOrder](u.entries)
	if err != nil {
		return fmt.Errorf("entries: %w", err)
	}
	entries, err := u.checkFront(tree)
	if err != nil {
		return fmt.Errorf("front: %w", err)
	}
	keys, err := checkTree[node, keyOrder](u.keys)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b *node) int { return strings.Compare(a.workKey, b.workKey) })
	if !slices.Equal(sorted, keys) {
		return errors.New("the entries and keys trees hold different nodes")
	}
	want := byDueAt.first(u.entries)
	if u.front != nil {
		want = u.front.slot[0].n
	}
	if u.first != want {
		return errors.New("first is not the first of its front, or of its entries tree without one")
	}
	if u.first != nil {
		if ts, tn := u.turn(); ts != u.turnSec || tn != u.turnNsec {
			return errors.New("filed under a Turn that is not its own")
		}
	}
	group, listed := inGroups[u]
	if has := len(entries) > 0; listed != has || inDue[u] != has || (listed && group != u.group) {
		return fmt.Errorf("has entries %v, in group tree %q %v (its group %q), in byDue %v", has, group, listed, u.group, inDue[u])
	}
	for _, n := range entries {
		c := cmpTime(n.visSec, n.visNsec, n.dueSec, n.dueNsec)
		if tok := n.claimToken(); (tok == 0 && c != 0) || (tok != 0 && c <= 0) || tok > m.tokens {
			return fmt.Errorf("entry %q: token %d (last %d), visible-at vs DueAt %d", n.workKey, tok, m.tokens, c)
		}
		if t := n.claim; t != nil && (m.claims.get(t.token) != t || t.u != u || t.n != n) {
			return fmt.Errorf("entry %q: claims does not file it under its token %d", n.workKey, t.token)
		}
	}
	if u.called != 0 {
		return fmt.Errorf("counts %d entries claimed by a Claim that has returned", u.called)
	}
	if cmpTime(u.passSec, u.passNsec, u.servedSec, u.servedNsec) > 0 {
		return errors.New("its pass is after its LastServed")
	}
	if err := u.limits().Validate(); err != nil {
		return err
	}
	return m.checkTickets(u, entries)
}

// checkFront verifies u's front against tree, the nodes of its entries tree in order, and
// returns all of u's entries in (DueAt, WorkKey) order: the front holds at least one entry
// and at most headSize, in order, each before the tree's first, its slots as their nodes
// have them and unused ones empty, its least visible-at, its nodes' tree links cleared; a
// user without a front has fewer than two entries.
func (u *user) checkFront(tree []*node) ([]*node, error) {
	f := u.front
	if f == nil {
		if len(tree) > 1 {
			return nil, fmt.Errorf("none, with %d entries", len(tree))
		}
		return tree, nil
	}
	if f.n < 1 || f.n > headSize {
		return nil, fmt.Errorf("holds %d entries", f.n)
	}
	var all []*node
	for i := range headSize {
		s := f.slot[i]
		if i >= f.n {
			if s != (frontSlot{}) {
				return nil, fmt.Errorf("unused slot %d is not empty", i)
			}
			continue
		}
		if s != slotOf(s.n) || s.n.kid != [2]*node{} {
			return nil, fmt.Errorf("slot %d is not as its node %q", i, s.n.workKey)
		}
		all = append(all, s.n)
	}
	all = append(all, tree...)
	for i := 1; i < len(all); i++ {
		if !entryBefore(all[i-1], all[i]) {
			return nil, fmt.Errorf("entry %q is not ordered before %q", all[i-1].workKey, all[i].workKey)
		}
	}
	g := *f
	g.fixMin()
	if g.minSec != f.minSec || g.minNsec != f.minNsec {
		return nil, errors.New("its least visible-at is stale")
	}
	return all, nil
}

// TestTimeRoundTrip pins that stored times come back Equal and in UTC, the zero time as the
// zero time, across [vocab.MinTime, vocab.MaxTime], and that the stored order is the times' order.
func TestTimeRoundTrip(t *testing.T) {
	times := []time.Time{
		vocab.MinTime,
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1600, 5, 6, 7, 8, 9, 999_999_999, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.FixedZone("x", 3600)),
		vocab.MaxTime,
	}
	for i, tm := range times {
		got := joinTime(splitTime(tm))
		if !got.Equal(tm) || got.IsZero() != tm.IsZero() || got.Location() != time.UTC {
			t.Errorf("round trip of %v gave %v", tm, got)
		}
		if i > 0 {
			as, an := splitTime(times[i-1])
			bs, bn := splitTime(tm)
			if cmpTime(as, an, bs, bn) >= 0 {
				t.Errorf("%v does not store before %v", times[i-1], tm)
			}
		}
	}
	if joinTime(splitTime(time.Time{})) != (time.Time{}) {
		t.Errorf("the zero time does not come back as time.Time{}")
	}
	if s, ns := splitTime(time.Time{}); s != 0 || ns != 0 {
		t.Errorf("the zero time is stored as (%d, %d), want the zero value", s, ns)
	}
}

// TestNodeSize pins the layout the figures of Memory's doc rest on (see
// BenchmarkMemoryPerEntry): a node fills one 128-byte size class, a user one 192-byte
// class, a ticket (the record of a current claim) one 64-byte class, and a front one
// 576-byte class.
func TestNodeSize(t *testing.T) {
	if s := unsafe.Sizeof(node{}); s != 128 {
		t.Errorf("node is %d bytes, want 128", s)
	}
	var n node
	if end := unsafe.Offsetof(n.prio) + unsafe.Sizeof(n.prio); end > 64 {
		t.Errorf("the fields an entries-tree walk reads end at byte %d, past the first cache line", end)
	}
	if s := unsafe.Sizeof(user{}); s <= 176 || s > 192 {
		t.Errorf("user is %d bytes, want 177 to 192", s)
	}
	if s := unsafe.Sizeof(ticket{}); s <= 48 || s > 64 {
		t.Errorf("ticket is %d bytes, want 49 to 64", s)
	}
	if s := unsafe.Sizeof(front{}); s <= 512 || s > 576 {
		t.Errorf("front is %d bytes, want 513 to 576", s)
	}
}
