package duework

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Memory is the in-memory Index: the embedded default for a service that runs on one
// machine. Make one with NewMemory. It is safe for concurrent use; every method takes one
// mutex for O(log n) work plus what it returns.
//
// Its dispatch reads cost what they return, not what is stored: every user keeps its
// unclaimed entries in a tree ordered by (DueAt, WorkKey), and the users with unclaimed
// entries sit in a tree ordered by their earliest DueAt, so DueHeads visits only the users
// with something due and only the first perUser+1 entries of each, however deep a backlog
// is behind them. Claimed entries leave those trees for a tree ordered by Until; a read at
// now first moves every claim with Until <= now back, so an expired claim makes its entry due
// again without anyone touching it.
//
// Times come back in UTC, without a monotonic clock reading; compare them with Equal. A
// stored entry costs about 130 bytes of heap beyond its strings, and each user about 100
// more (see the package documentation).
type Memory struct {
	mu     sync.Mutex
	users  map[string]*user
	byDue  *user  // users with unclaimed entries, by (earliest DueAt, UserID)
	claims *node  // held claims, by (Until, Token)
	tokens uint64 // the last token handed out; only grows
}

var _ Index = (*Memory)(nil)

// NewMemory returns an empty in-memory Index.
func NewMemory() *Memory {
	return &Memory{users: map[string]*user{}}
}

// node is one stored entry. It is in exactly one of two trees through kid: the Memory's
// claims tree (claimed, and no read since the claim had a now at or past its Until) or its
// user's free tree (every other entry, including one whose claim a read saw end: it keeps
// its token, so that the claimant can still complete it) — and always in its user's keys
// tree through keyKid. Times are kept as Unix seconds and nanoseconds, which is compact and
// covers every time.Time.
type node struct {
	user      *user
	workKey   string
	tier      string
	kid       [2]*node
	keyKid    [2]*node
	dueSec    int64
	lastSec   int64
	untilSec  int64
	token     uint64 // the entry's current claim; 0 when it has none
	streak    int
	dueNsec   int32
	lastNsec  int32
	untilNsec int32
	prio      uint32 // heldBit: in the claims tree; the rest: treap priority
}

// user is one tenant's part of the index.
type user struct {
	id    string
	free  *node    // unclaimed entries (and those whose claim ended), by (DueAt, WorkKey)
	first *node    // min of free, nil when free is empty; the user is in byDue iff non-nil
	keys  *node    // every entry, by WorkKey
	kid   [2]*user // links in Memory.byDue
	// servedSec and servedNsec are LastServed; the zero time when never served.
	servedSec  int64
	servedNsec int32
	prio       uint32
}

const heldBit = 1 << 31

func (n *node) held() bool { return n.prio&heldBit != 0 }

// set copies e's fields into n; the identity (user, workKey) stays.
func (n *node) set(e Entry) {
	n.tier = e.Tier
	n.dueSec, n.dueNsec = splitTime(e.DueAt)
	n.lastSec, n.lastNsec = splitTime(e.LastRunAt)
	n.streak = e.MissStreak
}

func (n *node) entry() Entry {
	return Entry{
		UserID:     n.user.id,
		WorkKey:    n.workKey,
		Tier:       n.tier,
		DueAt:      joinTime(n.dueSec, n.dueNsec),
		LastRunAt:  joinTime(n.lastSec, n.lastNsec),
		MissStreak: n.streak,
	}
}

// visible reports whether a node of a free tree is due and unclaimed at now: DueAt <= now
// and no claim with Until > now. (A claim that ended at an earlier read can be in force
// again at a now that went backwards.)
func (n *node) visible(sec int64, nsec int32) bool {
	if cmpTime(n.dueSec, n.dueNsec, sec, nsec) > 0 {
		return false
	}
	return n.token == 0 || cmpTime(n.untilSec, n.untilNsec, sec, nsec) <= 0
}

func splitTime(t time.Time) (int64, int32) { return t.Unix(), int32(t.Nanosecond()) }

// joinTime inverts splitTime; the zero time comes back as the zero time.
func joinTime(sec int64, nsec int32) time.Time { return time.Unix(sec, int64(nsec)).UTC() }

func cmpTime(as int64, an int32, bs int64, bn int32) int {
	return cmp.Or(cmp.Compare(as, bs), cmp.Compare(an, bn))
}

var (
	freeTree = treap[node]{
		cmp: func(a, b *node) int {
			return cmp.Or(cmpTime(a.dueSec, a.dueNsec, b.dueSec, b.dueNsec), strings.Compare(a.workKey, b.workKey))
		},
		kids: func(n *node) *[2]*node { return &n.kid },
		prio: func(n *node) uint32 { return n.prio &^ heldBit },
	}
	claimTree = treap[node]{
		cmp: func(a, b *node) int {
			return cmp.Or(cmpTime(a.untilSec, a.untilNsec, b.untilSec, b.untilNsec), cmp.Compare(a.token, b.token))
		},
		kids: func(n *node) *[2]*node { return &n.kid },
		prio: func(n *node) uint32 { return n.prio &^ heldBit },
	}
	keyTree = treap[node]{
		cmp:  func(a, b *node) int { return strings.Compare(a.workKey, b.workKey) },
		kids: func(n *node) *[2]*node { return &n.keyKid },
		prio: func(n *node) uint32 { return n.prio &^ heldBit },
	}
	// userTree orders users by (DueAt of their first free entry, UserID) — not by the
	// first entry's WorkKey — so that DueBefore's merge, which walks it in that order, meets
	// users in its own (DueAt, UserID, WorkKey) order.
	userTree = treap[user]{
		cmp: func(a, b *user) int {
			return cmp.Or(cmpTime(a.first.dueSec, a.first.dueNsec, b.first.dueSec, b.first.dueNsec), strings.Compare(a.id, b.id))
		},
		kids: func(u *user) *[2]*user { return &u.kid },
		prio: func(u *user) uint32 { return u.prio },
	}
)

// cmpUserDue orders by (DueAt, UserID, WorkKey), DueBefore's order.
func cmpUserDue(a, b *node) int {
	return cmp.Or(cmpTime(a.dueSec, a.dueNsec, b.dueSec, b.dueNsec),
		strings.Compare(a.user.id, b.user.id), strings.Compare(a.workKey, b.workKey))
}

func (u *user) lastServed() time.Time { return joinTime(u.servedSec, u.servedNsec) }

func (u *user) lookup(workKey string) *node {
	return keyTree.find(u.keys, func(n *node) int { return strings.Compare(workKey, n.workKey) })
}

// addFree puts n into its user's free tree, keeping the user's place in byDue.
func (m *Memory) addFree(n *node) {
	n.prio &^= heldBit
	u := n.user
	if u.first != nil && freeTree.cmp(n, u.first) > 0 {
		u.free = freeTree.insert(u.free, n)
		return
	}
	if u.first != nil {
		m.byDue = userTree.remove(m.byDue, u)
	}
	u.free = freeTree.insert(u.free, n)
	u.first = n
	m.byDue = userTree.insert(m.byDue, u)
}

// removeFree takes n out of its user's free tree, keeping the user's place in byDue.
func (m *Memory) removeFree(n *node) {
	u := n.user
	if n != u.first {
		u.free = freeTree.remove(u.free, n)
		return
	}
	m.byDue = userTree.remove(m.byDue, u)
	u.free = freeTree.remove(u.free, n)
	u.first = freeTree.min(u.free)
	if u.first != nil {
		m.byDue = userTree.insert(m.byDue, u)
	}
}

// detach takes n out of whichever of the free or claims trees holds it.
func (m *Memory) detach(n *node) {
	if n.held() {
		m.claims = claimTree.remove(m.claims, n)
		n.prio &^= heldBit
		return
	}
	m.removeFree(n)
}

// release moves every claim with Until <= now back to its user's free tree. The entry keeps
// its token, so the claimant can still complete it until someone claims it again.
func (m *Memory) release(sec int64, nsec int32) {
	for {
		c := claimTree.min(m.claims)
		if c == nil || cmpTime(c.untilSec, c.untilNsec, sec, nsec) > 0 {
			return
		}
		m.claims = claimTree.remove(m.claims, c)
		m.addFree(c)
	}
}

// nextVisible returns the first node of n's free tree from n on (n included when from) that
// is visible at now and due by then, or nil.
func nextVisible(n *node, sec int64, nsec int32, from bool) *node {
	u := n.user
	if !from {
		n = freeTree.after(u.free, n)
	}
	for n != nil && cmpTime(n.dueSec, n.dueNsec, sec, nsec) <= 0 {
		if n.visible(sec, nsec) {
			return n
		}
		n = freeTree.after(u.free, n)
	}
	return nil
}

// Schedule inserts or replaces tc's entry e.WorkKey; replacing a claimed entry ends the
// claim. O(log n).
func (m *Memory) Schedule(ctx context.Context, tc tenancy.Context, e Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.users[e.UserID]
	if u == nil {
		u = &user{id: e.UserID, prio: rand.Uint32()}
		u.servedSec, u.servedNsec = splitTime(time.Time{})
		m.users[e.UserID] = u
	}
	n := u.lookup(e.WorkKey)
	if n != nil {
		m.detach(n)
	} else {
		n = &node{user: u, workKey: e.WorkKey, prio: rand.Uint32() &^ heldBit}
		u.keys = keyTree.insert(u.keys, n)
	}
	n.set(e)
	n.token = 0
	m.addFree(n)
	return nil
}

// Unschedule removes tc's entry workKey whatever its claim; an absent entry is not an
// error. O(log n).
func (m *Memory) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := ValidateWorkKey(workKey); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.users[tc.UserID()]
	if u == nil {
		return nil
	}
	n := u.lookup(workKey)
	if n == nil {
		return nil
	}
	m.detach(n)
	u.keys = keyTree.remove(u.keys, n)
	if u.keys == nil && u.lastServed().IsZero() {
		delete(m.users, u.id)
	}
	return nil
}

// Get returns tc's entry workKey, claimed or not, or ErrNotFound. O(log n).
func (m *Memory) Get(ctx context.Context, tc tenancy.Context, workKey string) (Entry, error) {
	if err := tc.Check(); err != nil {
		return Entry{}, err
	}
	if err := ValidateWorkKey(workKey); err != nil {
		return Entry{}, err
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if u := m.users[tc.UserID()]; u != nil {
		if n := u.lookup(workKey); n != nil {
			return n.entry(), nil
		}
	}
	return Entry{}, fmt.Errorf("duework: Get %q: %w", workKey, ErrNotFound)
}

// DueBefore returns at most limit unclaimed entries with DueAt <= now, ordered by (DueAt,
// UserID, WorkKey). It merges the users' free trees, so it costs O(limit · log n) plus the
// claims that ended since the last read.
func (m *Memory) DueBefore(ctx context.Context, now time.Time, limit int) ([]Entry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit must be at least 1, got %d", ErrInvalid, limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sec, nsec := splitTime(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release(sec, nsec)

	var out []Entry
	var h nodeHeap
	u := userTree.min(m.byDue)
	for len(out) < limit {
		// Bring in every user whose earliest entry may come before the heap's top.
		for u != nil && cmpTime(u.first.dueSec, u.first.dueNsec, sec, nsec) <= 0 &&
			(len(h) == 0 || cmp.Or(cmpTime(u.first.dueSec, u.first.dueNsec, h[0].dueSec, h[0].dueNsec), strings.Compare(u.id, h[0].user.id)) < 0) {
			if n := nextVisible(u.first, sec, nsec, true); n != nil {
				h.push(n)
			}
			u = userTree.after(m.byDue, u)
		}
		if len(h) == 0 {
			break
		}
		n := h.pop()
		out = append(out, n.entry())
		if s := nextVisible(n, sec, nsec, false); s != nil {
			h.push(s)
		}
	}
	return out, nil
}

// DueHeads returns, in UserID order, one Head per user with unclaimed entries due at now:
// its first perUser of them in (DueAt, WorkKey) order, More when it has further ones, and
// LastServed. It visits only the users with something due and perUser+1 entries of each: for
// h heads it costs O(h · (log n + perUser) + h log h), however many entries are stored.
func (m *Memory) DueHeads(ctx context.Context, now time.Time, perUser int) ([]Head, error) {
	if perUser < 1 {
		return nil, fmt.Errorf("%w: perUser must be at least 1, got %d", ErrInvalid, perUser)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sec, nsec := splitTime(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release(sec, nsec)

	// The users with something due, counted first so that their slice is sized once.
	isDue := func(u *user) bool { return cmpTime(u.first.dueSec, u.first.dueNsec, sec, nsec) <= 0 }
	count := 0
	userTree.ascend(m.byDue, func(u *user) bool {
		if !isDue(u) {
			return false
		}
		count++
		return true
	})
	due := make([]*user, 0, count)
	userTree.ascend(m.byDue, func(u *user) bool {
		if !isDue(u) {
			return false
		}
		due = append(due, u)
		return true
	})
	slices.SortFunc(due, func(a, b *user) int { return strings.Compare(a.id, b.id) })

	// Gather the nodes first, then copy them into one exactly sized backing array for every
	// head's Due: a few allocations instead of one per head. Each Due is capped at its
	// length, so a caller appending to one reallocates it.
	heads := make([]Head, 0, len(due))
	ends := make([]int, 0, len(due))
	nodes := make([]*node, 0, len(due))
	for _, u := range due {
		start, more := len(nodes), false
		freeTree.ascend(u.free, func(n *node) bool {
			if cmpTime(n.dueSec, n.dueNsec, sec, nsec) > 0 {
				return false
			}
			if !n.visible(sec, nsec) {
				return true
			}
			if len(nodes)-start == perUser {
				more = true
				return false
			}
			nodes = append(nodes, n)
			return true
		})
		if len(nodes) > start {
			heads = append(heads, Head{UserID: u.id, LastServed: u.lastServed(), More: more})
			ends = append(ends, len(nodes))
		}
	}
	all := make([]Entry, len(nodes))
	for i, n := range nodes {
		all[i] = n.entry()
	}
	start := 0
	for i, end := range ends {
		heads[i].Due = all[start:end:end]
		start = end
	}
	return heads, nil
}

// Claim claims, atomically, those of keys that are due at now and unclaimed, until until,
// and returns their claims in the order of keys; a key given twice is claimed once. Tokens
// come from one counter per Memory that only grows, so no two claims ever share one, and
// none is 0. It stamps LastServed = now for every user it claimed an entry of.
// O(len(keys) · log n).
func (m *Memory) Claim(ctx context.Context, keys []Key, now, until time.Time) ([]Claim, error) {
	if !until.After(now) {
		return nil, fmt.Errorf("%w: until %v is not after now %v", ErrInvalid, until, now)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sec, nsec := splitTime(now)
	usec, unsec := splitTime(until)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release(sec, nsec)

	// out stays nil when nothing is claimed; at the first claim it is sized for every key
	// left, which is exact when all are claimable, as a dispatcher's keys usually are.
	var out []Claim
	for i, k := range keys {
		u := m.users[k.UserID]
		if u == nil {
			continue
		}
		n := u.lookup(k.WorkKey)
		if n == nil || n.held() || !n.visible(sec, nsec) {
			continue
		}
		m.removeFree(n)
		m.tokens++
		n.token = m.tokens
		n.untilSec, n.untilNsec = usec, unsec
		n.prio |= heldBit
		m.claims = claimTree.insert(m.claims, n)
		u.servedSec, u.servedNsec = sec, nsec
		if out == nil {
			out = make([]Claim, 0, len(keys)-i)
		}
		out = append(out, Claim{Entry: n.entry(), Token: n.token, Until: until})
	}
	return out, nil
}

// Complete replaces the claimed entry with next and ends the claim, or returns ErrClaimLost
// and writes nothing when c is not the entry's current claim: a later claim replaced it, the
// host rescheduled or unscheduled the entry, or it never was. It succeeds past c.Until as
// long as no later claim was made. O(log n).
func (m *Memory) Complete(ctx context.Context, tc tenancy.Context, c Claim, next Entry) error {
	if err := next.Validate(tc); err != nil {
		return err
	}
	if c.Entry.UserID != tc.UserID() {
		return fmt.Errorf("%w: claim's UserID %q is not the context's user %q", ErrInvalid, c.Entry.UserID, tc.UserID())
	}
	if next.WorkKey != c.Entry.WorkKey {
		return fmt.Errorf("%w: next WorkKey %q is not the claim's %q", ErrInvalid, next.WorkKey, c.Entry.WorkKey)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var n *node
	if u := m.users[tc.UserID()]; u != nil {
		n = u.lookup(next.WorkKey)
	}
	if n == nil || n.token == 0 || n.token != c.Token {
		return fmt.Errorf("duework: Complete %q with token %d: %w", next.WorkKey, c.Token, ErrClaimLost)
	}
	m.detach(n)
	n.set(next)
	n.token = 0
	m.addFree(n)
	return nil
}

// nodeHeap is a binary min-heap of nodes in DueBefore's order.
type nodeHeap []*node

func (h *nodeHeap) push(n *node) {
	*h = append(*h, n)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if cmpUserDue(s[i], s[p]) >= 0 {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *nodeHeap) pop() *node {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = nil
	s = s[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(s) && cmpUserDue(s[l], s[small]) < 0 {
			small = l
		}
		if r := l + 1; r < len(s) && cmpUserDue(s[r], s[small]) < 0 {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}
