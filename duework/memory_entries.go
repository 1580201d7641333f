package duework

import (
	"cmp"
	"strings"
	"time"
	"unique"

	"github.com/rotaworks/rota/internal/vocab"
)

// Memory's entries: how a node stores one, its times, and the two trees of a user's
// entries.

// node is one stored entry: in its user's front (memory_front.go) or entries tree
// (byDueAt), both in (DueAt, WorkKey) order, the tree augmented with the least visible-at
// instant of its subtree, and in its user's keys tree (byKey). Times are seconds since vocab.MinTime plus nanoseconds, so the
// zero value is the zero time and every time in [vocab.MinTime, vocab.MaxTime] is kept
// exactly. Its tier is interned, one copy per distinct tier name. It has no pointer to its
// user: every path to a node comes through the user. It fills one 128-byte size class,
// whose objects start on a 128-byte boundary: the fields a walk of the entries tree reads
// at each node (its links, DueAt, visible-at, least visible-at, priority) come first and
// share one 64-byte cache line, the rest the other.
type node struct {
	kid      [2]*node // links in the entries tree
	dueSec   int64
	visSec   int64 // visible-at: DueAt, or max(DueAt, Until) while claimed
	minSec   int64 // the least visible-at in this node's subtree of the entries tree
	dueNsec  int32
	visNsec  int32
	minNsec  int32
	prio     uint32
	claim    *ticket // the entry's current claim; nil when it has none
	workKey  string
	tier     unique.Handle[string]
	keyKid   [2]*node // links in the keys tree
	lastSec  int64
	lastNsec int32
	streak   int32 // MissStreak
	errors   int32 // ErrorStreak
}

// minUnix is vocab.MinTime as Unix seconds: stored seconds count from it.
var minUnix = vocab.MinTime.Unix()

func splitTime(t time.Time) (int64, int32) { return t.Unix() - minUnix, int32(t.Nanosecond()) }

// joinTime inverts splitTime; the zero time comes back as the zero time.
func joinTime(sec int64, nsec int32) time.Time {
	return time.Unix(sec+minUnix, int64(nsec)).UTC()
}

func cmpTime(as int64, an int32, bs int64, bn int32) int {
	if as != bs {
		return cmp.Compare(as, bs)
	}
	return cmp.Compare(an, bn)
}

// thenID orders by c, a comparison of times, then by the two IDs: cheaper than cmp.Or,
// which would compare the strings every time.
func thenID(c int, a, b string) int {
	if c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// noTier is the tier of an entry without one, and of a node not yet set.
var noTier = unique.Make("")

// set copies e's fields into n and leaves it unclaimed; the identity (user, workKey) stays.
// A tier as n's already is not interned again.
func (n *node) set(e Entry) {
	if n.tier.Value() != e.Tier {
		n.tier = unique.Make(e.Tier)
	}
	n.dueSec, n.dueNsec = splitTime(e.DueAt)
	n.lastSec, n.lastNsec = splitTime(e.LastRunAt)
	n.streak, n.errors = int32(e.MissStreak), int32(e.ErrorStreak)
	n.claim = nil
	n.visSec, n.visNsec = n.dueSec, n.dueNsec
}

// claimToken is the token of n's current claim, or 0 when it has none.
func (n *node) claimToken() uint64 {
	if n.claim == nil {
		return 0
	}
	return n.claim.token
}

func (n *node) entry(u *user) Entry {
	return Entry{
		UserID:      u.id,
		WorkKey:     n.workKey,
		Tier:        n.tier.Value(),
		DueAt:       joinTime(n.dueSec, n.dueNsec),
		LastRunAt:   joinTime(n.lastSec, n.lastNsec),
		MissStreak:  int(n.streak),
		ErrorStreak: int(n.errors),
	}
}

// visibleBy reports whether n is visible at now (sec, nsec).
func (n *node) visibleBy(sec int64, nsec int32) bool {
	return cmpTime(n.visSec, n.visNsec, sec, nsec) <= 0
}

// claimedUntil reports whether until is the Until of n's claim, which n keeps as its
// visible-at: the claim made it visible at max(DueAt, Until) = Until.
func (n *node) claimedUntil(until time.Time) bool {
	sec, nsec := splitTime(until)
	return n.visSec == sec && n.visNsec == nsec
}

// laterThan reports whether every entry of n's subtree is visible only after now: a
// cursor's prune for the entries tree.
func laterThan(n *node, sec int64, nsec int32) bool {
	return cmpTime(n.minSec, n.minNsec, sec, nsec) > 0
}

// The trees of a user's entries.
var (
	byDueAt treap[node, entryOrder]
	byKey   treap[node, keyOrder]
)

// entryOrder is the entries tree's: by (DueAt, WorkKey), augmented with the least
// visible-at of each subtree (minSec, minNsec), so that a read finds the visible entries
// without walking the ones that are not.
type entryOrder struct{}

// entryBefore reports whether a is ordered before b in the entries tree, by (DueAt,
// WorkKey); it compares the keys only when the times are equal.
func entryBefore(a, b *node) bool { return dueBeforeAt(a.dueSec, a.dueNsec, a, b.dueSec, b.dueNsec, b) }

// dueBeforeAt reports whether entry a, due at (as, an), is ordered before entry b, due at
// (bs, bn), in (DueAt, WorkKey) order. The due times are given apart from the nodes so
// that a front compares its own copies of them, and reads a node only for a tie.
func dueBeforeAt(as int64, an int32, a *node, bs int64, bn int32, b *node) bool {
	if as != bs {
		return as < bs
	}
	if an != bn {
		return an < bn
	}
	return a.workKey < b.workKey
}

func (entryOrder) kids(n *node) *[2]*node {
	if trace != nil {
		trace.entries++
	}
	return &n.kid
}

// sink lowers at's least visible-at to n's on the way down: above n's place only n's own
// visible-at is new to each subtree.
func (entryOrder) sink(at, n *node) (**node, bool) {
	if n.prio > at.prio {
		return nil, false
	}
	if n.visSec < at.minSec || n.visSec == at.minSec && n.visNsec < at.minNsec {
		at.minSec, at.minNsec = n.visSec, n.visNsec
	}
	return side(&at.kid, entryBefore(n, at)), true
}

// toward: a subtree whose least visible-at was below n's keeps it when n leaves, so only
// the nodes whose least was n's own are stale.
func (entryOrder) toward(at, n *node, leave bool) (**node, bool, bool) {
	stale := leave && at.minSec == n.visSec && at.minNsec == n.visNsec
	before := entryBefore(n, at)
	return side(&at.kid, before), before, stale
}

func (entryOrder) above(a, b *node) bool { return a.prio > b.prio }
func (entryOrder) augmented() bool       { return true }

// fix recomputes n's least visible-at from its own and its kids'.
func (entryOrder) fix(n *node) bool {
	s, ns := n.visSec, n.visNsec
	for _, k := range n.kid {
		if k != nil && (k.minSec < s || k.minSec == s && k.minNsec < ns) {
			s, ns = k.minSec, k.minNsec
		}
	}
	changed := s != n.minSec || ns != n.minNsec
	n.minSec, n.minNsec = s, ns
	return changed
}

// keyOrder is the keys tree's: by WorkKey.
type keyOrder struct{ plain[node] }

func (keyOrder) kids(n *node) *[2]*node { return &n.keyKid }

func (keyOrder) seek(n *node, k string) (int, *[2]*node) {
	return strings.Compare(k, n.workKey), &n.keyKid
}

func (keyOrder) sink(at, n *node) (**node, bool) {
	if n.prio > at.prio {
		return nil, false
	}
	return side(&at.keyKid, n.workKey < at.workKey), true
}

func (keyOrder) toward(at, n *node, _ bool) (**node, bool, bool) {
	before := n.workKey < at.workKey
	return side(&at.keyKid, before), before, false
}

func (keyOrder) above(a, b *node) bool { return a.prio > b.prio }

// lookup returns u's entry workKey, or nil.
func (u *user) lookup(workKey string) *node { return find[node, keyOrder](u.keys, workKey) }

// visibleAfter returns the first node of the entries tree at root that is ordered after
// key (from the first when key is nil) and visible at now, or nil. O(log n): it follows
// key's path and prunes every subtree whose least visible-at is after now.
func visibleAfter(root, key *node, sec int64, nsec int32) *node {
	if root == nil || laterThan(root, sec, nsec) {
		return nil
	}
	var o entryOrder
	k := o.kids(root)
	if key != nil && !entryBefore(key, root) {
		return visibleAfter(k[1], key, sec, nsec)
	}
	if n := visibleAfter(k[0], key, sec, nsec); n != nil {
		return n
	}
	if root.visibleBy(sec, nsec) {
		return root
	}
	return visibleAfter(k[1], nil, sec, nsec)
}

// visibleBesides reports whether u, whose first entry is visible at now, has another entry
// visible then. Ready of one entry per user, the dispatcher's usual read, needs no more of
// a user: the rest of its front and its tree's root tell. Without a front, the tree's root
// or first's right subtree usually tells without the O(log n) walk down first's path that
// decides the rest.
func visibleBesides(u *user, sec int64, nsec int32) bool {
	if fr := u.front; fr != nil {
		for i := 1; i < fr.n; i++ {
			if s := &fr.slot[i]; cmpTime(s.visSec, s.visNsec, sec, nsec) <= 0 {
				return true
			}
		}
		return u.entries != nil && !laterThan(u.entries, sec, nsec)
	}
	f, root := u.first, u.entries
	if root != f && root.visibleBy(sec, nsec) {
		return true
	}
	var o entryOrder
	if r := o.kids(f)[1]; r != nil && !laterThan(r, sec, nsec) {
		return true
	}
	return visibleAfter(root, f, sec, nsec) != nil
}

// trace, when not nil, counts the nodes each kind of tree hands out (a node's links read
// once is one visit): the cost tests measure the reads' work with it, without a clock.
var trace *visits

// visits is what trace counts: users of a group's tree, entries, users of Memory.byDue.
type visits struct{ users, entries, byDue int }
