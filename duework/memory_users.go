package duework

import (
	"math/rand/v2"
	"time"
)

// Memory's users: how one is kept, its group's tree (its queue), and
// its Turn and limits.

// user is one tenant's part of the index. It is in its group's tree and in Memory.byDue
// exactly when it has entries. It fills one 192-byte size class.
type user struct {
	id      string
	group   string
	entries *node    // the entries after its front, by (DueAt, WorkKey)
	keys    *node    // by WorkKey
	first   *node    // its first entry; nil when it has none
	front   *front   // its first entries, ahead of entries; nil without two or more
	claims  *ticket  // its current claims by (Until, token); nil while it has none
	gkid    [2]*user // links in the group's tree
	dueAt   int      // its slot in Memory.byDue plus 1; 0 while it is not there
	every   time.Duration
	// servedSec and servedNsec are LastServed, heldSec and heldNsec the hold's end, passSec
	// and passNsec the stride position, rateSec and rateNsec the rate mark; zero for never
	// and none. turnSec and turnNsec are the Turn the user is filed under in its group's
	// tree, while it is there.
	servedSec  int64
	heldSec    int64
	turnSec    int64
	passSec    int64
	rateSec    int64
	servedNsec int32
	heldNsec   int32
	turnNsec   int32
	passNsec   int32
	rateNsec   int32
	// weight, maxInFlight, burst and every are its Limits, which Validate bounds.
	weight      int32
	maxInFlight int32
	burst       int32
	prio        uint32
	called      int32  // its entries the running Claim has claimed; 0 between calls
	pause       *pause // its pause while it counts; nil without one
}

// The trees of users.
var byTurn treap[user, groupOrder]

// groupOrder is a group's tree's: by (Turn, UserID), the Turn each user is filed under.
type groupOrder struct{ plain[user] }

func groupBefore(a, b *user) bool {
	if a.turnSec != b.turnSec {
		return a.turnSec < b.turnSec
	}
	if a.turnNsec != b.turnNsec {
		return a.turnNsec < b.turnNsec
	}
	return a.id < b.id
}

func (groupOrder) kids(u *user) *[2]*user {
	if trace != nil {
		trace.users++
	}
	return &u.gkid
}

func (groupOrder) sink(at, u *user) (**user, bool) {
	if u.prio > at.prio {
		return nil, false
	}
	return side(&at.gkid, groupBefore(u, at)), true
}

func (groupOrder) toward(at, u *user, _ bool) (**user, bool, bool) {
	before := groupBefore(u, at)
	return side(&at.gkid, before), before, false
}

func (groupOrder) above(a, b *user) bool { return a.prio > b.prio }

// user returns the user id, made on first use in the unrouted group.
func (m *Memory) user(id string) *user {
	u := m.users[id]
	if u == nil {
		u = &user{id: id, prio: rand.Uint32()}
		m.users[id] = u
	}
	return u
}

// dequeue takes u, which has entries, out of its group's tree.
func (m *Memory) dequeue(u *user) {
	if root := byTurn.remove(m.groups[u.group], u); root != nil {
		m.groups[u.group] = root
	} else {
		delete(m.groups, u.group)
	}
}

// enqueue files u, which has entries, in its group's tree under its Turn.
func (m *Memory) enqueue(u *user) {
	u.turnSec, u.turnNsec = u.turn()
	m.groups[u.group] = byTurn.insert(m.groups[u.group], u)
}

// requeue moves u to where its Turn now puts it after a write, had telling whether it had
// entries before: a write that leaves the Turn as it was costs nothing here.
func (m *Memory) requeue(u *user, had bool) {
	if had && u.first != nil {
		if ts, tn := u.turn(); ts == u.turnSec && tn == u.turnNsec {
			return
		}
	}
	if had {
		m.dequeue(u)
	}
	if u.first != nil {
		m.enqueue(u)
	}
}

// turn computes the user's Turn, max(ReadyAt, pass); the user must have entries. O(log c)
// for c current claims.
func (u *user) turn() (int64, int32) {
	ms, mn := u.leastVisible()
	s, n := later(ms, mn, u.passSec, u.passNsec)
	if m := int(u.maxInFlight); m > 0 {
		if t := latest(u.claims, m); t != nil {
			s, n = later(s, n, t.n.visSec, t.n.visNsec)
		}
	}
	if u.every > 0 {
		rs, rn := u.rateAt()
		s, n = later(s, n, rs, rn)
	}
	if p := u.pause; p != nil && p.counts() {
		s, n = later(s, n, p.sec, p.nsec)
	}
	return s, n
}

// rateAt is the instant the rate lets u be claimed again: mark − (b−1)·Every, clamped at
// vocab.MinTime; u must have Every > 0.
func (u *user) rateAt() (int64, int32) {
	return subScaled(u.rateSec, u.rateNsec, int64(max(u.burst, 1)-1), u.every)
}

// inFlight counts u's current claims whose Until is after now (sec, nsec). O(log c).
func (u *user) inFlight(sec int64, nsec int32) int { return endingAfter(u.claims, sec, nsec) }

// cap returns how many visible entries u's limits let Ready return at now, at most
// perUser × its weight, and its in-flight count then. O(log c).
func (u *user) cap(sec int64, nsec int32, perUser int) (limit, inFlight int) {
	limit = perUser * int(max(u.weight, 1))
	inFlight = u.inFlight(sec, nsec)
	if m := int(u.maxInFlight); m > 0 {
		limit = min(limit, max(0, m-inFlight))
	}
	if u.every > 0 {
		limit = min(limit, allowance(u.rateSec, u.rateNsec, sec, nsec, u.every, int(max(u.burst, 1))))
	}
	return limit, inFlight
}

// allows reports whether u's limits and pause let one more of its entries be claimed at
// now, after the claims made so far. O(log c).
func (u *user) allows(sec int64, nsec int32) bool {
	if u.pause != nil && u.pausedAt(sec, nsec) {
		return false
	}
	if m := int(u.maxInFlight); m > 0 && u.inFlight(sec, nsec) >= m {
		return false
	}
	if u.every > 0 {
		if rs, rn := u.rateAt(); cmpTime(rs, rn, sec, nsec) > 0 {
			return false
		}
	}
	return true
}

// served applies the rest of one claim at now to u: the rate mark, the end of its hold,
// and its count for the running Claim, which lists it on its first (stride, at the end of
// the call, moves LastServed).
func (m *Memory) served(u *user, sec int64, nsec int32) {
	if u.every > 0 {
		rs, rn := later(u.rateSec, u.rateNsec, sec, nsec)
		u.rateSec, u.rateNsec = addScaled(rs, rn, 1, u.every)
	}
	u.heldSec, u.heldNsec = 0, 0
	if u.called == 0 {
		m.touched = append(m.touched, u)
	}
	u.called++
}

// stride moves u's pass and LastServed after a Claim at now that claimed k = u.called of
// its entries, and drops its pause if that ends it. T, its Turn before the call, is still
// the one it is filed under: Claim requeues the users it served only after every stride.
func (m *Memory) stride(u *user, sec int64, nsec int32) {
	k, w := int(u.called), int(max(u.weight, 1))
	u.called = 0
	ts, tn := u.turnSec, u.turnNsec
	if k < w && (u.servedSec != 0 || u.servedNsec != 0) && cmpTime(u.servedSec, u.servedNsec, sec, nsec) < 0 {
		// The stride starts no earlier than now − 3w·(now − LastServed).
		fs, fn := strideFloor(u.servedSec, u.servedNsec, sec, nsec, w)
		ts, tn = later(ts, tn, fs, fn)
	}
	if k >= w || cmpTime(ts, tn, sec, nsec) >= 0 {
		u.passSec, u.passNsec = later(u.passSec, u.passNsec, sec, nsec)
	} else {
		ps, pn := strided(ts, tn, sec, nsec, k, w)
		u.passSec, u.passNsec = later(u.passSec, u.passNsec, ps, pn)
	}
	u.servedSec, u.servedNsec = later(u.servedSec, u.servedNsec, sec, nsec)
	if u.pause != nil {
		m.unpause(u, false) // served at or after its end, the pause no longer counts
	}
}

// limits returns u's Limits as Route stored them.
func (u *user) limits() Limits {
	return Limits{Weight: int(u.weight), MaxInFlight: int(u.maxInFlight), Every: u.every, Burst: int(u.burst)}
}

// setLimits stores l, which Validate accepted.
func (u *user) setLimits(l Limits) {
	u.weight, u.maxInFlight, u.every, u.burst = int32(l.Weight), int32(l.MaxInFlight), l.Every, int32(l.Burst)
}

func (u *user) heldAt(sec int64, nsec int32) bool {
	return cmpTime(u.heldSec, u.heldNsec, sec, nsec) > 0
}
