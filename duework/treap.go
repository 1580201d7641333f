package duework

// treap holds the operations of one kind of intrusive treap: a binary search tree whose
// nodes carry their own child links (so a tree costs no allocation beyond its nodes) and a
// random priority that keeps the expected depth O(log n).
//
// The tree itself is just its root pointer; every operation takes the root and returns the
// new one. Keys must be unique within a tree: cmp orders nodes totally.
type treap[T any] struct {
	cmp  func(a, b *T) int // the tree's order
	kids func(n *T) *[2]*T // the node's links for this tree
	prio func(n *T) uint32 // the node's heap priority
}

// insert adds n, which must not be in the tree, and returns the new root. O(log n) expected.
func (t *treap[T]) insert(root, n *T) *T {
	if root == nil {
		*t.kids(n) = [2]*T{}
		return n
	}
	if t.prio(n) > t.prio(root) {
		l, r := t.split(root, n)
		*t.kids(n) = [2]*T{l, r}
		return n
	}
	k := t.kids(root)
	if t.cmp(n, root) < 0 {
		k[0] = t.insert(k[0], n)
	} else {
		k[1] = t.insert(k[1], n)
	}
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
		return root, b
	}
	a, b := t.split(k[0], key)
	k[0] = b
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
		return a
	default:
		k := t.kids(b)
		k[0] = t.merge(a, k[0])
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

// after returns the first node ordered after key (which need not be in the tree), or nil.
func (t *treap[T]) after(root, key *T) *T {
	var best *T
	for root != nil {
		if t.cmp(key, root) < 0 {
			best = root
			root = t.kids(root)[0]
		} else {
			root = t.kids(root)[1]
		}
	}
	return best
}

// find returns the node n with probe(n) == 0, where probe(n) compares the sought key with
// n's (negative: the key is ordered before n), or nil.
func (t *treap[T]) find(root *T, probe func(n *T) int) *T {
	for root != nil {
		c := probe(root)
		if c == 0 {
			return root
		}
		if c < 0 {
			root = t.kids(root)[0]
		} else {
			root = t.kids(root)[1]
		}
	}
	return nil
}

// ascend calls f on the nodes in order until f returns false; it reports whether f always
// returned true. Stopping early costs O(log n) plus the nodes visited.
func (t *treap[T]) ascend(root *T, f func(n *T) bool) bool {
	for root != nil {
		k := t.kids(root)
		if !t.ascend(k[0], f) || !f(root) {
			return false
		}
		root = k[1]
	}
	return true
}
