package duework

// Memory.byDue: the users with entries, in a binary min-heap by (DueAt of the user's first
// entry, UserID) — not by the first entry's WorkKey — so that DueBefore, which walks its
// prefix in that order, meets users in its own (DueAt, UserID, WorkKey) order. Each slot
// keeps its user's first DueAt beside the user, so the heap's comparisons read one array
// and follow no pointer, and each user keeps its slot's index, so that a write moves it in
// O(log u) for u users, in place. Only DueBefore reads it.

// dueSlot is one user in Memory.byDue under its first entry's DueAt.
type dueSlot struct {
	sec  int64
	nsec int32
	u    *user
}

// dueBefore reports whether a is ordered before b: by DueAt, then UserID.
func dueBefore(a, b *dueSlot) bool {
	if a.sec != b.sec {
		return a.sec < b.sec
	}
	if a.nsec != b.nsec {
		return a.nsec < b.nsec
	}
	return a.u.id < b.u.id
}

// dueUsers is Memory.byDue: the heap of slots. A user in it has dueAt == its index + 1;
// one not in it has dueAt 0.
type dueUsers []dueSlot

// file puts u, whose first entry is set, in the heap, or moves it there after its first
// entry changed. O(log u).
func (h *dueUsers) file(u *user) {
	f := u.first
	if u.dueAt == 0 {
		*h = append(*h, dueSlot{})
		u.dueAt = len(*h)
	}
	i := u.dueAt - 1
	s := *h
	s[i] = dueSlot{sec: f.dueSec, nsec: f.dueNsec, u: u}
	if !s.up(i) {
		s.down(i)
	}
}

// remove takes u, which is in the heap, out of it. O(log u).
func (h *dueUsers) remove(u *user) {
	s := *h
	i, last := u.dueAt-1, len(s)-1
	u.dueAt = 0
	if i != last {
		s[i] = s[last]
		s[i].u.dueAt = i + 1
	}
	s[last] = dueSlot{}
	s = s[:last]
	*h = s
	if i < last && !s.up(i) {
		s.down(i)
	}
}

// up moves slot i toward the root while it is ordered before its parent, and reports
// whether it moved.
func (s dueUsers) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !dueBefore(&s[i], &s[p]) {
			break
		}
		s.swap(i, p)
		i, moved = p, true
	}
	return moved
}

// down moves slot i away from the root while a child is ordered before it.
func (s dueUsers) down(i int) {
	for {
		l, least := 2*i+1, i
		if l < len(s) && dueBefore(&s[l], &s[least]) {
			least = l
		}
		if r := l + 1; r < len(s) && dueBefore(&s[r], &s[least]) {
			least = r
		}
		if least == i {
			return
		}
		s.swap(i, least)
		i = least
	}
}

func (s dueUsers) swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].u.dueAt, s[j].u.dueAt = i+1, j+1
}

// dueWalk hands out the users of a dueUsers heap in its order, one at a time: a frontier of
// slots (those whose parent it has handed out) in a heap of its own. Handing out k users
// costs O(k log k), whatever the heap's size.
type dueWalk struct {
	s        dueUsers
	frontier []int // indexes into s, a min-heap in s's order
}

func (w *dueWalk) start(s dueUsers) {
	w.s, w.frontier = s, w.frontier[:0]
	if len(s) > 0 {
		w.frontier = append(w.frontier, 0)
	}
}

// peek returns the next slot in order without handing it out, or nil at the end.
func (w *dueWalk) peek() *dueSlot {
	if len(w.frontier) == 0 {
		return nil
	}
	if trace != nil {
		trace.byDue++
	}
	return &w.s[w.frontier[0]]
}

// next hands out the next slot, which peek returned.
func (w *dueWalk) next() {
	f := w.frontier
	i := f[0]
	last := len(f) - 1
	f[0] = f[last]
	f = f[:last]
	w.siftDown(f, 0)
	for _, c := range [2]int{2*i + 1, 2*i + 2} {
		if c < len(w.s) {
			f = append(f, c)
			w.siftUp(f, len(f)-1)
		}
	}
	w.frontier = f
}

func (w *dueWalk) less(f []int, a, b int) bool { return dueBefore(&w.s[f[a]], &w.s[f[b]]) }

func (w *dueWalk) siftUp(f []int, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !w.less(f, i, p) {
			return
		}
		f[i], f[p] = f[p], f[i]
		i = p
	}
}

func (w *dueWalk) siftDown(f []int, i int) {
	for {
		l, least := 2*i+1, i
		if l < len(f) && w.less(f, l, least) {
			least = l
		}
		if r := l + 1; r < len(f) && w.less(f, r, least) {
			least = r
		}
		if least == i {
			return
		}
		f[i], f[least] = f[least], f[i]
		i = least
	}
}
