package duework

// A user's first entries: the front, a short sorted array ahead of its entries tree.
//
// The dispatcher takes a user's entries from the front of its (DueAt, WorkKey) order, one
// or a few per cycle, and completing each moves it to a later DueAt. In the entries tree
// alone, that is three walks down the tree per entry (the claim's change of visible-at,
// and the completion's removal and insertion), each node a likely cache miss once the
// index outgrows the caches. So a user with more than one entry keeps its first headSize
// entries in an array of their own, each with its DueAt and visible-at beside it: claiming,
// completing or handing back one of them costs a scan of the array and no walk, and the
// tree gives up its first entries headSize at a time, in one walk, when the array empties.
// Every entry of the front is ordered before every entry of the tree.

// headSize is the most entries a user's front holds.
const headSize = 16

// frontSlot is one entry of a front, with its DueAt and visible-at as its node has them.
type frontSlot struct {
	dueSec  int64
	visSec  int64
	n       *node
	dueNsec int32
	visNsec int32
}

// front is a user's first entries in (DueAt, WorkKey) order, slot[:n], and the least
// visible-at among them. A user has one, holding at least one entry, from its second
// entry until it has none: the array costs a user with a single entry nothing.
type front struct {
	slot    [headSize]frontSlot
	n       int
	minSec  int64
	minNsec int32
}

// slotOf returns n's slot.
func slotOf(n *node) frontSlot {
	return frontSlot{dueSec: n.dueSec, visSec: n.visSec, n: n, dueNsec: n.dueNsec, visNsec: n.visNsec}
}

// beforeSlot reports whether n is ordered before s's entry in (DueAt, WorkKey) order.
func beforeSlot(n *node, s *frontSlot) bool {
	return dueBeforeAt(n.dueSec, n.dueNsec, n, s.dueSec, s.dueNsec, s.n)
}

// slotBefore reports whether s's entry is ordered before n in (DueAt, WorkKey) order.
func slotBefore(s *frontSlot, n *node) bool {
	return dueBeforeAt(s.dueSec, s.dueNsec, s.n, n.dueSec, n.dueNsec, n)
}

// fixMin recomputes the front's least visible-at.
func (f *front) fixMin() {
	if f.n == 0 {
		f.minSec, f.minNsec = 0, 0
		return
	}
	s, ns := f.slot[0].visSec, f.slot[0].visNsec
	for i := 1; i < f.n; i++ {
		if x := &f.slot[i]; x.visSec < s || x.visSec == s && x.visNsec < ns {
			s, ns = x.visSec, x.visNsec
		}
	}
	f.minSec, f.minNsec = s, ns
}

// index returns the slot of n, which is in the front.
func (f *front) index(n *node) int {
	for i := range f.n {
		if f.slot[i].n == n {
			return i
		}
	}
	panic("duework: internal error: an entry ordered within the front is not in it")
}

// inFront reports whether n, one of u's entries, is in its front: whether it is ordered no
// later than the front's last entry. n's DueAt must be the one it is filed under.
func (u *user) inFront(n *node) bool {
	f := u.front
	return f != nil && f.n > 0 && !slotBefore(&f.slot[f.n-1], n)
}

// file puts n, one of u's entries not filed yet, in its front when it is ordered before the
// front's last entry (the last then moves to the tree if the front is full) or when the tree
// is empty and the front has room, and otherwise in the entries tree. O(log n).
func (u *user) file(n *node) {
	f := u.front
	if f == nil || !(f.n > 0 && beforeSlot(n, &f.slot[f.n-1]) || u.entries == nil && f.n < headSize) {
		u.entries = byDueAt.insert(u.entries, n)
		return
	}
	if f.n == headSize {
		f.n--
		last := f.slot[f.n].n
		f.slot[f.n] = frontSlot{}
		u.entries = byDueAt.insert(u.entries, last)
	}
	i := f.n
	for i > 0 && beforeSlot(n, &f.slot[i-1]) {
		i--
	}
	copy(f.slot[i+1:f.n+1], f.slot[i:f.n])
	f.slot[i] = slotOf(n)
	f.n++
	n.kid = [2]*node{}
	f.fixMin()
}

// unfile takes n, one of u's entries, out of its front or its entries tree. O(log n).
func (u *user) unfile(n *node) {
	if !u.inFront(n) {
		u.entries = byDueAt.remove(u.entries, n)
		return
	}
	f := u.front
	i := f.index(n)
	copy(f.slot[i:f.n-1], f.slot[i+1:f.n])
	f.n--
	f.slot[f.n] = frontSlot{}
	f.fixMin()
}

// revisit files the new visible-at of n, one of u's entries, whose DueAt is unchanged.
// O(1) in the front, O(log n) in the tree.
func (u *user) revisit(n *node) {
	if !u.inFront(n) {
		byDueAt.update(u.entries, n)
		return
	}
	f := u.front
	s := &f.slot[f.index(n)]
	s.visSec, s.visNsec = n.visSec, n.visNsec
	f.fixMin()
}

// settle sets u.first after a write to u's entries: a front that has emptied takes the
// tree's first entries, and one left with none is dropped; a user without one gets one
// when its tree holds two entries or more. O(log n) when it refills.
func (u *user) settle() {
	f := u.front
	switch {
	case f != nil && f.n == 0:
		u.refill()
		if f.n == 0 {
			u.front = nil
		}
	case f == nil && u.entries != nil && (u.entries.kid[0] != nil || u.entries.kid[1] != nil):
		u.front = &front{}
		u.refill()
	}
	if u.front != nil {
		u.first = u.front.slot[0].n
	} else {
		u.first = byDueAt.first(u.entries)
	}
}

// refill moves the entries tree's first headSize entries, or all it has, into u's empty
// front: an in-order walk to the last of them, then one split of the tree after it.
// O(headSize + log n).
func (u *user) refill() {
	f := u.front
	var o entryOrder
	var buf [64]*node
	stack := buf[:0]
	for n := u.entries; n != nil; n = o.kids(n)[0] {
		stack = append(stack, n)
	}
	for f.n < headSize && len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for r := o.kids(n)[1]; r != nil; r = o.kids(r)[0] {
			stack = append(stack, r)
		}
		f.slot[f.n] = slotOf(n)
		f.n++
	}
	if f.n == 0 {
		return
	}
	_, u.entries = byDueAt.split(u.entries, f.slot[f.n-1].n, true)
	for i := range f.n {
		f.slot[i].n.kid = [2]*node{}
	}
	f.fixMin()
}

// leastVisible returns the least visible-at among u's entries; u must have entries.
func (u *user) leastVisible() (int64, int32) {
	r := u.entries
	f := u.front
	if f == nil {
		return r.minSec, r.minNsec
	}
	if r != nil && (r.minSec < f.minSec || r.minSec == f.minSec && r.minNsec < f.minNsec) {
		return r.minSec, r.minNsec
	}
	return f.minSec, f.minNsec
}

// visibleAfter returns u's first entry ordered after key (from the first when key is nil)
// and visible at now, or nil. O(headSize + log n).
func (u *user) visibleAfter(key *node, sec int64, nsec int32) *node {
	f := u.front
	if f == nil {
		return visibleAfter(u.entries, key, sec, nsec)
	}
	i := 0
	if key != nil {
		if !u.inFront(key) {
			return visibleAfter(u.entries, key, sec, nsec)
		}
		i = f.index(key) + 1
	}
	for ; i < f.n; i++ {
		if s := &f.slot[i]; cmpTime(s.visSec, s.visNsec, sec, nsec) <= 0 {
			return s.n
		}
	}
	return visibleAfter(u.entries, nil, sec, nsec)
}
