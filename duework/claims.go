package duework

// ticket is one current claim of an entry: in Memory.claims under its token, and in its
// user's tree of claims, a treap ordered by (Until, token) and augmented with each
// subtree's size, so that the user's in-flight count at any now and the M-th latest Until
// among its claims each cost O(log c) for c claims. The Until is the entry's visible-at,
// which a claimed node keeps (DueAt <= the Claim's now < Until), and the token is the
// node's: a ticket is taken out of its tree before either changes. A user has a tree only
// while it has current claims, so an unclaimed entry costs nothing here.
type ticket struct {
	u       *user
	n       *node
	kid     [2]*ticket
	prio    uint32 // the node's priority: random, and independent of the tree's order
	size    int32  // the tickets in this subtree
	started bool   // StartClaims has marked the claim started
}

// ticketBefore reports whether a is ordered before b in a tree of claims, by (Until,
// token).
func ticketBefore(a, b *ticket) bool {
	an, bn := a.n, b.n
	if an.visSec != bn.visSec {
		return an.visSec < bn.visSec
	}
	if an.visNsec != bn.visNsec {
		return an.visNsec < bn.visNsec
	}
	return an.token < bn.token
}

func ticketsIn(t *ticket) int32 {
	if t == nil {
		return 0
	}
	return t.size
}

func (t *ticket) resize() { t.size = 1 + ticketsIn(t.kid[0]) + ticketsIn(t.kid[1]) }

// insertTicket adds t, which must not be in the tree at root, and returns the new root.
// O(log c) expected: every subtree above t's place grows by one, so sizes are counted up on
// the way down.
func insertTicket(root, t *ticket) *ticket {
	link := &root
	for at := root; at != nil && t.prio <= at.prio; at = *link {
		at.size++
		if ticketBefore(t, at) {
			link = &at.kid[0]
		} else {
			link = &at.kid[1]
		}
	}
	t.kid[0], t.kid[1] = splitTickets(*link, t)
	t.resize()
	*link = t
	return root
}

func splitTickets(root, key *ticket) (l, r *ticket) {
	if root == nil {
		return nil, nil
	}
	if ticketBefore(root, key) {
		root.kid[1], r = splitTickets(root.kid[1], key)
		root.resize()
		return root, r
	}
	l, root.kid[0] = splitTickets(root.kid[0], key)
	root.resize()
	return l, root
}

func mergeTickets(a, b *ticket) *ticket {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.kid[1] = mergeTickets(a.kid[1], b)
		a.resize()
		return a
	default:
		b.kid[0] = mergeTickets(a, b.kid[0])
		b.resize()
		return b
	}
}

// removeTicket takes t, which must be in the tree at root, out of it and returns the new
// root. O(log c) expected.
func removeTicket(root, t *ticket) *ticket {
	link := &root
	for at := root; at != t; at = *link {
		if at == nil {
			panic("duework: internal error: removing a claim that is not in the tree")
		}
		at.size--
		if ticketBefore(t, at) {
			link = &at.kid[0]
		} else {
			link = &at.kid[1]
		}
	}
	*link = mergeTickets(t.kid[0], t.kid[1])
	t.kid = [2]*ticket{}
	return root
}

// endingAfter counts the claims in the tree at root whose Until is after now (sec, nsec):
// a user's in-flight count. O(log c).
func endingAfter(root *ticket, sec int64, nsec int32) int {
	n := 0
	for t := root; t != nil; {
		if cmpTime(t.n.visSec, t.n.visNsec, sec, nsec) > 0 {
			n += 1 + int(ticketsIn(t.kid[1]))
			t = t.kid[0]
		} else {
			t = t.kid[1]
		}
	}
	return n
}

// latest returns the claim with the k-th latest Until in the tree at root (k from 1), or
// nil when it holds fewer than k. O(log c).
func latest(root *ticket, k int) *ticket {
	for t := root; t != nil; {
		r := int(ticketsIn(t.kid[1]))
		switch {
		case k <= r:
			t = t.kid[1]
		case k == r+1:
			return t
		default:
			k -= r + 1
			t = t.kid[0]
		}
	}
	return nil
}
