package duework

// treap holds the operations of one kind of intrusive treap: a binary search tree whose
// nodes carry their own child links (so a tree costs no allocation beyond its nodes) and a
// random priority that keeps the expected depth O(log n).
//
// The tree itself is just its root pointer; every operation takes the root and returns the
// new one. Keys must be unique within a tree: cmp orders nodes totally. A tree may keep an
// augmentation, a value each node computes from its own fields and its children's: fix
// recomputes it for one node, and every operation calls it, bottom-up, on each node whose
// subtree it changed.
type treap[T any] struct {
	cmp  func(a, b *T) int // the tree's order
	kids func(n *T) *[2]*T // the node's links for this tree
	prio func(n *T) uint32 // the node's heap priority
	fix  func(n *T)        // recomputes n's augmentation from n and its kids; nil for none
}

func (t *treap[T]) pull(n *T) {
	if t.fix != nil {
		t.fix(n)
	}
}

// insert adds n, which must not be in the tree, and returns the new root. O(log n) expected.
func (t *treap[T]) insert(root, n *T) *T {
	if root == nil {
		*t.kids(n) = [2]*T{}
		t.pull(n)
		return n
	}
	if t.prio(n) > t.prio(root) {
		l, r := t.split(root, n)
		*t.kids(n) = [2]*T{l, r}
		t.pull(n)
		return n
	}
	k := t.kids(root)
	if t.cmp(n, root) < 0 {
		k[0] = t.insert(k[0], n)
	} else {
		k[1] = t.insert(k[1], n)
	}
	t.pull(root)
	return root
}

// split divides the tree at root into the nodes ordered before key and those after it.
func (t *treap[T]) split(root, key *T) (l, r *T) {
	if root == nil {
		return nil, nil
	}
	k := t.kids(root)
	if t.cmp(root, key) < 0 {
		a, b := t.split(k[1], key)
		k[1] = a
		t.pull(root)
		return root, b
	}
	a, b := t.split(k[0], key)
	k[0] = b
	t.pull(root)
	return a, root
}

// merge joins two trees whose every node of a is ordered before every node of b.
func (t *treap[T]) merge(a, b *T) *T {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case t.prio(a) > t.prio(b):
		k := t.kids(a)
		k[1] = t.merge(k[1], b)
		t.pull(a)
		return a
	default:
		k := t.kids(b)
		k[0] = t.merge(a, k[0])
		t.pull(b)
		return b
	}
}

// remove takes n, which must be in the tree, out of it and returns the new root.
// O(log n) expected.
func (t *treap[T]) remove(root, n *T) *T {
	if root == nil {
		panic("duework: internal error: removing a node that is not in the tree")
	}
	if root == n {
		k := t.kids(n)
		m := t.merge(k[0], k[1])
		*k = [2]*T{}
		return m
	}
	k := t.kids(root)
	if t.cmp(n, root) < 0 {
		k[0] = t.remove(k[0], n)
	} else {
		k[1] = t.remove(k[1], n)
	}
	t.pull(root)
	return root
}

// min returns the first node in order, or nil for an empty tree.
func (t *treap[T]) min(root *T) *T {
	if root == nil {
		return nil
	}
	for {
		l := t.kids(root)[0]
		if l == nil {
			return root
		}
		root = l
	}
}

// cursor walks a tree in order with an explicit stack: O(depth) to start, then O(1)
// amortized per node. When prune is set, the cursor passes over every subtree whose root
// prune reports true for, given the cursor's bound (sec, nsec): a cursor over an augmented
// tree uses it to skip subtrees that hold nothing it wants. The tree must not change while
// a cursor walks it.
type cursor[T any] struct {
	t     *treap[T]
	prune func(n *T, sec int64, nsec int32) bool
	sec   int64
	nsec  int32
	stack []*T
}

// start resets the cursor to the first node of the tree at root.
func (c *cursor[T]) start(root *T) {
	clear(c.stack)
	c.stack = c.stack[:0]
	c.descend(root)
}

func (c *cursor[T]) descend(n *T) {
	for n != nil && (c.prune == nil || !c.prune(n, c.sec, c.nsec)) {
		c.stack = append(c.stack, n)
		n = c.t.kids(n)[0]
	}
}

// next returns the next node in order, or nil at the end.
func (c *cursor[T]) next() *T {
	if len(c.stack) == 0 {
		return nil
	}
	n := c.stack[len(c.stack)-1]
	c.stack[len(c.stack)-1] = nil
	c.stack = c.stack[:len(c.stack)-1]
	c.descend(c.t.kids(n)[1])
	return n
}
