package duework

import "strings"

// The writes' operations on a user's entries and keys trees and on Memory.byDue, written
// out for node and user rather than through entryTree's, keyTree's and dueTree's func
// fields: they run for every key claimed and completed, and a call through a func field is
// indirect and never inlined. Each behaves as the treap operation of the same name on
// entryTree, keyTree or dueTree, which stay the trees' definition (reads walk the trees
// through them, and the tests check every tree against them).

// entryBefore reports whether a is ordered before b in the entries tree, by (DueAt,
// WorkKey); it compares the keys only when the times are equal.
func entryBefore(a, b *node) bool {
	if a.dueSec != b.dueSec {
		return a.dueSec < b.dueSec
	}
	if a.dueNsec != b.dueNsec {
		return a.dueNsec < b.dueNsec
	}
	return a.workKey < b.workKey
}

// fixMin recomputes n's least visible-at from its own and its kids'.
func fixMin(n *node) {
	s, ns := n.visSec, n.visNsec
	for _, k := range n.kid {
		if k != nil && (k.minSec < s || k.minSec == s && k.minNsec < ns) {
			s, ns = k.minSec, k.minNsec
		}
	}
	n.minSec, n.minNsec = s, ns
}

// insertEntry adds n, which must not be in the entries tree at root, and returns the new
// root. O(log n) expected. Above n's place only n's own visible-at is new to each subtree,
// so the path's least visible-at is lowered to it on the way down, without reading the
// path's other kids, and only the one link that now leads to n is written.
func insertEntry(root, n *node) *node {
	link := &root
	for at := root; at != nil && n.prio <= at.prio; at = *link {
		if n.visSec < at.minSec || n.visSec == at.minSec && n.visNsec < at.minNsec {
			at.minSec, at.minNsec = n.visSec, n.visNsec
		}
		if entryBefore(n, at) {
			link = &at.kid[0]
		} else {
			link = &at.kid[1]
		}
	}
	n.kid[0], n.kid[1] = splitEntries(*link, n)
	fixMin(n)
	*link = n
	return root
}

// splitEntries divides the entries tree at root into the nodes ordered before key and those
// after it.
func splitEntries(root, key *node) (l, r *node) {
	if root == nil {
		return nil, nil
	}
	if entryBefore(root, key) {
		root.kid[1], r = splitEntries(root.kid[1], key)
		fixMin(root)
		return root, r
	}
	l, root.kid[0] = splitEntries(root.kid[0], key)
	fixMin(root)
	return l, root
}

// mergeEntries joins two entries trees whose every node of a is ordered before every node
// of b.
func mergeEntries(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.kid[1] = mergeEntries(a.kid[1], b)
		fixMin(a)
		return a
	default:
		b.kid[0] = mergeEntries(a, b.kid[0])
		fixMin(b)
		return b
	}
}

// removeEntry takes n, which must be in the entries tree at root, out of it and returns the
// new root. O(log n) expected. A subtree whose least visible-at was below n's keeps it, so
// only the path's nodes whose least was n's own are recomputed.
func removeEntry(root, n *node) *node {
	if root == nil {
		panic("duework: internal error: removing a node that is not in the tree")
	}
	if root == n {
		m := mergeEntries(n.kid[0], n.kid[1])
		n.kid = [2]*node{}
		return m
	}
	k := &root.kid[1]
	if entryBefore(n, root) {
		k = &root.kid[0]
	}
	if sub := removeEntry(*k, n); sub != *k { // written only where it changed
		*k = sub
	}
	if root.minSec == n.visSec && root.minNsec == n.visNsec {
		fixMin(root)
	}
	return root
}

// updateEntry recomputes the least visible-at on the path from root down to n, which must
// be in the entries tree, after a change to n's visible-at that keeps its place in the
// order. O(log n) expected.
func updateEntry(root, n *node) {
	if root == nil {
		panic("duework: internal error: updating a node that is not in the tree")
	}
	if root != n {
		if entryBefore(n, root) {
			updateEntry(root.kid[0], n)
		} else {
			updateEntry(root.kid[1], n)
		}
	}
	fixMin(root)
}

// firstEntry returns the first node of the entries tree at root, or nil.
func firstEntry(root *node) *node {
	if root == nil {
		return nil
	}
	for root.kid[0] != nil {
		root = root.kid[0]
	}
	return root
}

// lookup returns u's entry workKey, or nil: a walk down the keys tree, by WorkKey.
func (u *user) lookup(workKey string) *node {
	for n := u.keys; n != nil; {
		c := strings.Compare(workKey, n.workKey)
		if c == 0 {
			return n
		}
		if c < 0 {
			n = n.keyKid[0]
		} else {
			n = n.keyKid[1]
		}
	}
	return nil
}

// userDueBefore reports whether a is ordered before b in Memory.byDue, by (DueAt of their
// first entry, UserID): dueTree's order.
func userDueBefore(a, b *user) bool {
	af, bf := a.first, b.first
	if af.dueSec != bf.dueSec {
		return af.dueSec < bf.dueSec
	}
	if af.dueNsec != bf.dueNsec {
		return af.dueNsec < bf.dueNsec
	}
	return a.id < b.id
}

// insertByDue adds u, which must not be in the byDue tree at root, and returns the new
// root: dueTree.insert written out, as put moves a user in byDue for most completions.
func insertByDue(root, u *user) *user {
	link := &root
	for at := root; at != nil && u.prio <= at.prio; at = *link {
		if userDueBefore(u, at) {
			link = &at.dkid[0]
		} else {
			link = &at.dkid[1]
		}
	}
	u.dkid[0], u.dkid[1] = splitByDue(*link, u)
	*link = u
	return root
}

func splitByDue(root, key *user) (l, r *user) {
	if root == nil {
		return nil, nil
	}
	if userDueBefore(root, key) {
		root.dkid[1], r = splitByDue(root.dkid[1], key)
		return root, r
	}
	l, root.dkid[0] = splitByDue(root.dkid[0], key)
	return l, root
}

func mergeByDue(a, b *user) *user {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.dkid[1] = mergeByDue(a.dkid[1], b)
		return a
	default:
		b.dkid[0] = mergeByDue(a, b.dkid[0])
		return b
	}
}

// removeByDue takes u, which must be in the byDue tree at root, out of it and returns the
// new root: dueTree.remove written out.
func removeByDue(root, u *user) *user {
	if root == nil {
		panic("duework: internal error: removing a node that is not in the tree")
	}
	if root == u {
		m := mergeByDue(u.dkid[0], u.dkid[1])
		u.dkid = [2]*user{}
		return m
	}
	k := &root.dkid[1]
	if userDueBefore(u, root) {
		k = &root.dkid[0]
	}
	if sub := removeByDue(*k, u); sub != *k {
		*k = sub
	}
	return root
}
