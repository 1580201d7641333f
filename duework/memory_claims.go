package duework

import (
	"context"
	"fmt"

	"github.com/rotaworks/rota/tenancy"
)

// Memory's claims: the record of each current claim, its user's tree of claims, and the
// calls that start and hand back claims.

// ticket is one current claim of an entry: the node's claim, in Memory.claims under its
// token, and in its user's tree of claims, a treap ordered by (Until, token) and augmented
// with each subtree's size, so that the user's in-flight count at any now and the M-th
// latest Until among its claims each cost O(log c) for c claims. The Until is the entry's
// visible-at, which a claimed node keeps (DueAt <= the Claim's now < Until): a ticket is
// taken out of its tree before it changes. The node points at its ticket, so ending a claim
// finds it without a look-up by token. A user has a tree only while it has current claims,
// so an unclaimed entry costs nothing here.
type ticket struct {
	u       *user
	n       *node
	token   uint64
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
	return a.token < b.token
}

func ticketsIn(t *ticket) int32 {
	if t == nil {
		return 0
	}
	return t.size
}

// byEnd is the trees of claims.
var byEnd treap[ticket, ticketOrder]

// ticketOrder is a tree of claims': by (Until, token), augmented with each subtree's size.
type ticketOrder struct{}

func (ticketOrder) kids(t *ticket) *[2]*ticket { return &t.kid }

// sink counts t into at's size on the way down: every subtree above t's place grows by one.
func (ticketOrder) sink(at, t *ticket) (**ticket, bool) {
	if t.prio > at.prio {
		return nil, false
	}
	at.size++
	return side(&at.kid, ticketBefore(t, at)), true
}

// toward counts a leaving t out of at's size on the way down, so nothing is stale.
func (ticketOrder) toward(at, t *ticket, leave bool) (**ticket, bool, bool) {
	if leave {
		at.size--
	}
	before := ticketBefore(t, at)
	return side(&at.kid, before), before, false
}

func (ticketOrder) above(a, b *ticket) bool { return a.prio > b.prio }
func (ticketOrder) augmented() bool         { return true }

func (ticketOrder) fix(t *ticket) bool {
	size := 1 + ticketsIn(t.kid[0]) + ticketsIn(t.kid[1])
	changed := size != t.size
	t.size = size
	return changed
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

// current returns the ticket of tc's entry named by c while c is its current claim, or
// nil. O(1) expected: it finds the entry by c's token.
func (m *Memory) current(tc tenancy.Context, c Claim) *ticket {
	t := m.claims.get(c.Token)
	if t == nil || t.u.id != tc.UserID() || t.n.workKey != c.Entry.WorkKey {
		return nil
	}
	return t
}

// remember files n, u's entry, under its new claim's token and the Until it has just been
// given: in m.claims, in u's tree of claims and as n's claim. O(log c).
func (m *Memory) remember(u *user, n *node, token uint64) {
	t := m.spare
	if t != nil {
		m.spare, t.kid[0] = t.kid[0], nil
		m.spares--
	} else {
		t = &ticket{}
	}
	t.u, t.n, t.token, t.prio = u, n, token, n.prio
	u.claims = byEnd.insert(u.claims, t)
	m.claims.put(t)
	n.claim = t
}

// forget ends n's claim, if it has one, in m.claims and in its user's tree of claims; the
// caller is about to clear or replace n's token, or drop n. O(log c).
func (m *Memory) forget(n *node) {
	t := n.claim
	if t == nil {
		return
	}
	m.claims.remove(t.token)
	t.u.claims = byEnd.remove(t.u.claims, t)
	n.claim = nil
	*t = ticket{}
	if m.spares < maxScratch {
		t.kid[0], m.spare = m.spare, t
		m.spares++
	}
}

// UnscheduleClaimed removes tc's entry while c is its current claim, else returns
// ErrClaimLost and removes nothing. O(log n).
func (m *Memory) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c Claim) error {
	if err := (Unclaim{Tenant: tc, Claim: c}).Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.current(tc, c)
	if t == nil {
		return fmt.Errorf("duework: UnscheduleClaimed %q with token %d: %w", c.Entry.WorkKey, c.Token, ErrClaimLost)
	}
	m.drop(t.u, t.n)
	return nil
}

// StartClaims marks each claim that is current, with its own Until, and not yet started,
// all under one lock. It fails as a whole only when ctx is done before it starts.
// O(len(claims)).
func (m *Memory) StartClaims(ctx context.Context, claims []Unclaim) ([]error, error) {
	return m.eachClaim(ctx, "StartClaims", claims, func(t *ticket, c Claim) error {
		switch {
		case !t.n.claimedUntil(c.Until):
			return ErrClaimLost
		case t.started:
			return ErrClaimStarted
		}
		t.started = true
		return nil
	})
}

// Unclaim ends each claim that is still current and not started, and leaves its entry as
// it is, visible at once, all under one lock. O(len(claims) · log n).
func (m *Memory) Unclaim(ctx context.Context, claims []Unclaim) ([]error, error) {
	return m.eachClaim(ctx, "Unclaim", claims, func(t *ticket, _ Claim) error {
		if t.started {
			return ErrClaimStarted
		}
		m.unclaim(t.u, t.n)
		return nil
	})
}

// unclaim ends the claim of u's entry n and leaves the entry as it is: its DueAt, and so
// its place in every tree but the tree of claims, stays. O(log n).
func (m *Memory) unclaim(u *user, n *node) {
	m.forget(n)
	n.visSec, n.visNsec = n.dueSec, n.dueNsec
	u.revisit(n)
	m.requeue(u, true)
}

// eachClaim calls act, one item after another under one lock, with the ticket of each of
// claims that is its entry's current claim, and returns each item's outcome: an invalid
// item's error, ErrClaimLost for a claim that is not current, else act's error (a bare
// sentinel, which eachClaim wraps with op and the claim).
func (m *Memory) eachClaim(ctx context.Context, op string, claims []Unclaim, act func(*ticket, Claim) error) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs := make([]error, len(claims))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, c := range claims {
		if err := c.Validate(); err != nil {
			errs[i] = err
			continue
		}
		err := ErrClaimLost
		if t := m.current(c.Tenant, c.Claim); t != nil {
			err = act(t, c.Claim)
		}
		if err != nil {
			errs[i] = fmt.Errorf("duework: %s %q with token %d: %w", op, c.Claim.Entry.WorkKey, c.Claim.Token, err)
		}
	}
	return errs, nil
}
