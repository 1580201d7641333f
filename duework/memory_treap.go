package duework

// Memory keeps every ordered set but two (Memory.byDue, a heap: memory_due.go; each user's
// first entries, a sorted array: memory_front.go) in one kind of tree: an intrusive treap,
// a binary search tree whose nodes carry their own links (so a tree costs no allocation
// beyond its nodes) and a random priority that keeps the expected depth O(log n). A tree is
// its root pointer; every operation takes the root and returns the new one.
//
// What differs between the trees — which of a node's fields hold its links in this tree,
// how the tree orders its nodes, and the value each node may keep about its subtree (its
// augmentation: the least visible-at of a user's entries, the size of a tree of claims) —
// is an order, a zero-size type whose methods say it. The operations are written once,
// over any order, as the methods of treap. An order's methods are few and do a node's
// whole step at once (its priority, its place, its augmentation), because a generic
// function calls them indirectly: a call per node and step, not per field.

// order is one tree's rules over its node type N.
type order[N any] interface {
	// kids returns n's links in this tree.
	kids(n *N) *[2]*N
	// sink reports whether n, being inserted, goes below at (its priority is not above
	// at's); when it does, it adds n to at's augmentation and returns at's link toward n.
	sink(at, n *N) (**N, bool)
	// toward returns at's link toward n's place and whether n sorts before at. With leave
	// set, n is leaving at's subtree: it takes n out of at's augmentation where it can,
	// and reports in stale whether at must be fixed once n is gone.
	toward(at, n *N, leave bool) (link **N, before, stale bool)
	// above reports whether a goes above b in the heap of priorities.
	above(a, b *N) bool
	// augmented reports whether the tree keeps an augmentation, which fix recomputes for n
	// from n and its kids, reporting whether that changed it.
	augmented() bool
	fix(n *N) bool
}

// plain gives an order of a tree without an augmentation its augmented and fix.
type plain[N any] struct{}

func (plain[N]) augmented() bool { return false }
func (plain[N]) fix(*N) bool     { return false }

// side returns the link of k on the side of a node that sorts before its parent (the
// left) or after it.
func side[N any](k *[2]*N, before bool) **N {
	if before {
		return &k[0]
	}
	return &k[1]
}

// keyed is an order by one string per node, bytewise: its trees can be searched by key.
type keyed[N any] interface {
	order[N]
	// seek compares k with n's key, as strings.Compare(k, key) does, and returns n's links.
	seek(n *N, k string) (int, *[2]*N)
}

// treap holds the operations of the trees of order O over nodes N.
type treap[N any, O order[N]] struct{}

// insert adds n, which must not be in the tree at root, and returns the new root.
// O(log n) expected: on its way down it adds n to the augmentation of each node above n's
// place, so only n and the two trees split below it are fixed bottom-up.
func (t treap[N, O]) insert(root, n *N) *N {
	var o O
	link := &root
	for at := root; at != nil; at = *link {
		next, below := o.sink(at, n)
		if !below {
			break
		}
		link = next
	}
	aug, k := o.augmented(), o.kids(n)
	k[0], k[1] = t.split(*link, n, aug)
	if aug {
		o.fix(n)
	}
	*link = n
	return root
}

// split divides the tree at root into the nodes ordered before key and those after it.
func (t treap[N, O]) split(root, key *N, aug bool) (l, r *N) {
	if root == nil {
		return nil, nil
	}
	var o O
	next, before, _ := o.toward(root, key, false)
	if before {
		l, *next = t.split(*next, key, aug)
		r = root
	} else {
		*next, r = t.split(*next, key, aug)
		l = root
	}
	if aug {
		o.fix(root)
	}
	return l, r
}

// merge joins two trees whose every node of a is ordered before every node of b.
func (t treap[N, O]) merge(a, b *N, aug bool) *N {
	var o O
	var top *N
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case o.above(a, b):
		top = a
		k := o.kids(a)
		k[1] = t.merge(k[1], b, aug)
	default:
		top = b
		k := o.kids(b)
		k[0] = t.merge(a, k[0], aug)
	}
	if aug {
		o.fix(top)
	}
	return top
}

// remove takes n, which must be in the tree at root, out of it and returns the new root.
// O(log n) expected. It walks down to n, then fixes the nodes above it that the order
// says n's leaving may have changed, from n up; only the link to n is written.
func (t treap[N, O]) remove(root, n *N) *N {
	var o O
	var buf [64]*N
	stale := buf[:0] // the nodes to fix, from the root down
	link := &root
	for at := root; at != n; at = *link {
		if at == nil {
			panic("duework: internal error: removing a node that is not in the tree")
		}
		next, _, fix := o.toward(at, n, true)
		if fix {
			stale = append(stale, at)
		}
		link = next
	}
	k := o.kids(n)
	*link = t.merge(k[0], k[1], o.augmented())
	*k = [2]*N{}
	for i := len(stale) - 1; i >= 0; i-- {
		o.fix(stale[i])
	}
	return root
}

// update fixes the augmentation on the path from root down to n, which must be in the
// tree, after a change to n that keeps its place in the order. O(log n) expected. It fixes
// from n up and stops at the first node the fix leaves as it was, since the nodes above it
// are then as they were too.
func (t treap[N, O]) update(root, n *N) {
	var o O
	var buf [64]*N
	path := buf[:0] // the nodes above n, from the root down
	for at := root; at != n; {
		if at == nil {
			panic("duework: internal error: updating a node that is not in the tree")
		}
		path = append(path, at)
		next, _, _ := o.toward(at, n, false)
		at = *next
	}
	if !o.fix(n) {
		return
	}
	for i := len(path) - 1; i >= 0 && o.fix(path[i]); i-- {
	}
}

// first returns the first node of the tree at root in order, or nil when it is empty.
func (treap[N, O]) first(root *N) *N {
	var o O
	if root == nil {
		return nil
	}
	for {
		l := o.kids(root)[0]
		if l == nil {
			return root
		}
		root = l
	}
}

// find returns the node of the tree at root whose key is k, or nil: a walk down the tree.
func find[N any, O keyed[N]](root *N, k string) *N {
	var o O
	for n := root; n != nil; {
		c, kids := o.seek(n, k)
		switch {
		case c == 0:
			return n
		case c < 0:
			n = kids[0]
		default:
			n = kids[1]
		}
	}
	return nil
}

// walkAfter calls f with the nodes of the tree at root whose key sorts after k, in order,
// until f returns false; it reports whether f asked for more. It costs O(log n) plus what
// it hands f.
func walkAfter[N any, O keyed[N]](root *N, k string, f func(*N) bool) bool {
	if root == nil {
		return true
	}
	var o O
	c, kids := o.seek(root, k)
	if c < 0 {
		if !walkAfter[N, O](kids[0], k, f) || !f(root) {
			return false
		}
	}
	return walkAfter[N, O](kids[1], k, f)
}

// cursor walks a tree in order with an explicit stack: O(depth) to start, then O(1)
// amortized per node. When prune is set, the cursor passes over every subtree whose root
// prune reports true for, given the cursor's bound (sec, nsec): a cursor over an augmented
// tree uses it to skip subtrees that hold nothing it wants. The tree must not change while
// a cursor walks it.
type cursor[N any, O order[N]] struct {
	prune func(n *N, sec int64, nsec int32) bool
	sec   int64
	nsec  int32
	stack []*N
}

// start resets the cursor to the first node of the tree at root.
func (c *cursor[N, O]) start(root *N) {
	clear(c.stack)
	c.stack = c.stack[:0]
	c.descend(root)
}

func (c *cursor[N, O]) descend(n *N) {
	var o O
	for n != nil && (c.prune == nil || !c.prune(n, c.sec, c.nsec)) {
		c.stack = append(c.stack, n)
		n = o.kids(n)[0]
	}
}

// next returns the next node in order, or nil at the end.
func (c *cursor[N, O]) next() *N {
	if len(c.stack) == 0 {
		return nil
	}
	var o O
	n := c.stack[len(c.stack)-1]
	c.stack[len(c.stack)-1] = nil
	c.stack = c.stack[:len(c.stack)-1]
	c.descend(o.kids(n)[1])
	return n
}
