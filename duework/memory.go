package duework

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Memory is the in-memory Index: the embedded default for a service that runs on one
// machine. Make one with NewMemory. It is safe for concurrent use: every call takes one
// mutex.
//
// With n entries stored, each write costs O(log n): Schedule, Unschedule, Complete, and
// each item of ScheduleMissing, CompleteMany and Claim; so do Get, CheckClaim and
// UnscheduleClaimed. Ready costs O(log n), then O(1) for each user it reads or passes over
// because it is held, plus O(PerUser · log n) for each user's entries — never the number
// of users ready nor the depth of anyone's backlog. Route costs O(log n) per user moved,
// Release O(1) per user, Groups O(log n) per group. DueBefore costs O(log n) per entry it
// returns, plus O(log n) for each user it passes over because the entries it has due are
// all claimed.
//
// A stored entry takes 128 bytes of heap beyond its strings, which Memory shares with the
// caller, and up to about 60 more while it is claimed; each user, kept for good, about 150
// more.
//
// Memory keeps every time in [MinTime, MaxTime] exactly and returns it in UTC, without a
// monotonic clock reading; compare times with Equal.
type Memory struct {
	mu     sync.Mutex
	users  map[string]*user
	groups map[string]*user // each group's users with entries, by (Turn, UserID)
	byDue  *user            // users with entries, by (earliest DueAt, UserID)
	tokens uint64           // the last token handed out; only grows

	// claims finds each entry that has a claim by its token, so that a completion costs no
	// walk down its user's keys tree. It holds exactly the nodes whose token is not 0.
	// claimsPeak is its most entries since it was made: a map never shrinks, so once one
	// that grew past maxScratch empties it is made anew.
	claims     map[uint64]claimed
	claimsPeak int

	// Ready's working space, kept between calls so that a read allocates only its result.
	queue cursor[user]
	walk  cursor[node]
	picks []pick

	// read is the last Ready's result as nodes, in its order (and the next Ready's working
	// space), and readAt the next of them a Claim looks for first: the dispatcher claims
	// what it read, in the order it read it, so Claim finds most keys here with no walk
	// down a keys tree. read holds u's node for its WorkKey for as long as readDrops ==
	// drops: a node leaves its user only by drop, which counts itself in drops. A node
	// dropped since stays reachable from read, not from the index, until the next Ready.
	read             []claimed
	readAt           int
	drops, readDrops uint64
}

var (
	_ Index            = (*Memory)(nil)
	_ MissingScheduler = (*Memory)(nil)
	_ ClaimGuard       = (*Memory)(nil)
)

// NewMemory returns an empty in-memory Index.
func NewMemory() *Memory {
	return &Memory{
		users:  map[string]*user{},
		groups: map[string]*user{},
		claims: map[uint64]claimed{},
		queue:  cursor[user]{t: &groupTree},
		walk:   cursor[node]{t: &entryTree, prune: laterThan},
	}
}

// node is one stored entry: in its user's entries tree, ordered by (DueAt, WorkKey) and
// augmented with the least visible-at instant of its subtree, and in its user's keys tree.
// Times are seconds since MinTime plus nanoseconds, so the zero value is the zero time and
// every time in [MinTime, MaxTime] is kept exactly. It has no pointer to its user: every
// path to a node comes through the user. It fills one 128-byte size class.
type node struct {
	workKey  string
	tier     string
	kid      [2]*node // links in the entries tree
	keyKid   [2]*node // links in the keys tree
	dueSec   int64
	lastSec  int64
	visSec   int64  // visible-at: DueAt, or max(DueAt, Until) while claimed
	minSec   int64  // the least visible-at in this node's subtree of the entries tree
	token    uint64 // the entry's current claim; 0 when it has none
	dueNsec  int32
	lastNsec int32
	visNsec  int32
	minNsec  int32
	streak   int32
	prio     uint32
}

// user is one tenant's part of the index. It is in its group's tree and in Memory.byDue
// exactly when it has entries. It fills one 128-byte size class.
type user struct {
	id      string
	group   string
	entries *node    // by (DueAt, WorkKey)
	keys    *node    // by WorkKey
	first   *node    // the entries tree's first node; nil when it is empty
	gkid    [2]*user // links in the group's tree
	dkid    [2]*user // links in Memory.byDue
	// servedSec and servedNsec are LastServed, heldSec and heldNsec the hold's end; zero
	// for never and none. turnSec and turnNsec are the Turn the user is filed under in its
	// group's tree, while it is there.
	servedSec  int64
	heldSec    int64
	turnSec    int64
	servedNsec int32
	heldNsec   int32
	turnNsec   int32
	prio       uint32
}

// claimed is an entry that has a claim, with its user.
type claimed struct {
	u *user
	n *node
}

// pick is one head of a Ready being built: its user, the end of its nodes in Memory.read,
// and whether it has more visible entries.
type pick struct {
	u    *user
	end  int
	more bool
}

// minUnix is MinTime as Unix seconds: stored seconds count from it.
var minUnix = MinTime.Unix()

func splitTime(t time.Time) (int64, int32) { return t.Unix() - minUnix, int32(t.Nanosecond()) }

// joinTime inverts splitTime; the zero time comes back as the zero time.
func joinTime(sec int64, nsec int32) time.Time {
	return time.Unix(sec+minUnix, int64(nsec)).UTC()
}

func cmpTime(as int64, an int32, bs int64, bn int32) int {
	if as != bs {
		return cmp.Compare(as, bs)
	}
	return cmp.Compare(an, bn)
}

// thenID orders by c, a comparison of times, then by the two IDs: cheaper than cmp.Or,
// which would compare the strings every time.
func thenID(c int, a, b string) int {
	if c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// laterThan reports whether every entry of n's subtree is visible only after now: a
// cursor's prune for the entries tree.
func laterThan(n *node, sec int64, nsec int32) bool {
	return cmpTime(n.minSec, n.minNsec, sec, nsec) > 0
}

// visibleBy reports whether n is visible at now (sec, nsec).
func (n *node) visibleBy(sec int64, nsec int32) bool {
	return cmpTime(n.visSec, n.visNsec, sec, nsec) <= 0
}

// set copies e's fields into n and leaves it unclaimed; the identity (user, workKey) stays.
func (n *node) set(e Entry) {
	n.tier = e.Tier
	n.dueSec, n.dueNsec = splitTime(e.DueAt)
	n.lastSec, n.lastNsec = splitTime(e.LastRunAt)
	n.streak = int32(e.MissStreak)
	n.token = 0
	n.visSec, n.visNsec = n.dueSec, n.dueNsec
}

func (n *node) entry(u *user) Entry {
	return Entry{
		UserID:     u.id,
		WorkKey:    n.workKey,
		Tier:       n.tier,
		DueAt:      joinTime(n.dueSec, n.dueNsec),
		LastRunAt:  joinTime(n.lastSec, n.lastNsec),
		MissStreak: int(n.streak),
	}
}

// turn computes the user's Turn, max(ReadyAt, LastServed); the user must have entries.
func (u *user) turn() (int64, int32) {
	r := u.entries
	if cmpTime(u.servedSec, u.servedNsec, r.minSec, r.minNsec) > 0 {
		return u.servedSec, u.servedNsec
	}
	return r.minSec, r.minNsec
}

func (u *user) heldAt(sec int64, nsec int32) bool {
	return cmpTime(u.heldSec, u.heldNsec, sec, nsec) > 0
}

var (
	entryTree = treap[node]{
		cmp: func(a, b *node) int {
			return thenID(cmpTime(a.dueSec, a.dueNsec, b.dueSec, b.dueNsec), a.workKey, b.workKey)
		},
		kids: func(n *node) *[2]*node { return &n.kid },
		prio: func(n *node) uint32 { return n.prio },
		fix:  fixMin,
	}
	keyTree = treap[node]{
		cmp:  func(a, b *node) int { return strings.Compare(a.workKey, b.workKey) },
		kids: func(n *node) *[2]*node { return &n.keyKid },
		prio: func(n *node) uint32 { return n.prio },
	}
	// groupTree orders a group's users by (Turn, UserID), the Turn each is filed under.
	groupTree = treap[user]{
		cmp: func(a, b *user) int {
			return thenID(cmpTime(a.turnSec, a.turnNsec, b.turnSec, b.turnNsec), a.id, b.id)
		},
		kids: func(u *user) *[2]*user { return &u.gkid },
		prio: func(u *user) uint32 { return u.prio },
	}
	// dueTree orders users by (DueAt of their first entry, UserID) — not by the first
	// entry's WorkKey — so that DueBefore's merge, which walks it in that order, meets users
	// in its own (DueAt, UserID, WorkKey) order.
	dueTree = treap[user]{
		cmp: func(a, b *user) int {
			return thenID(cmpTime(a.first.dueSec, a.first.dueNsec, b.first.dueSec, b.first.dueNsec), a.id, b.id)
		},
		kids: func(u *user) *[2]*user { return &u.dkid },
		prio: func(u *user) uint32 { return u.prio },
	}
)

// dequeue takes u, which has entries, out of its group's tree.
func (m *Memory) dequeue(u *user) {
	if root := groupTree.remove(m.groups[u.group], u); root != nil {
		m.groups[u.group] = root
	} else {
		delete(m.groups, u.group)
	}
}

// enqueue files u, which has entries, in its group's tree under its Turn.
func (m *Memory) enqueue(u *user) {
	u.turnSec, u.turnNsec = u.turn()
	m.groups[u.group] = groupTree.insert(m.groups[u.group], u)
}

// requeue moves u to where its Turn now puts it after a write, had telling whether it had
// entries before: a write that leaves the Turn as it was costs nothing here.
func (m *Memory) requeue(u *user, had bool) {
	if had && u.entries != nil {
		if ts, tn := u.turn(); ts == u.turnSec && tn == u.turnNsec {
			return
		}
	}
	if had {
		m.dequeue(u)
	}
	if u.entries != nil {
		m.enqueue(u)
	}
}

// user returns the user id, made on first use in the unrouted group.
func (m *Memory) user(id string) *user {
	u := m.users[id]
	if u == nil {
		u = &user{id: id, prio: rand.Uint32()}
		m.users[id] = u
	}
	return u
}

// put stores e as u's entry n (nil: a new one), unclaimed. O(log n).
func (m *Memory) put(u *user, n *node, e Entry) {
	had, first := u.entries != nil, u.first
	if n == nil {
		n = &node{workKey: e.WorkKey, prio: rand.Uint32()}
		u.keys = keyTree.insert(u.keys, n)
	} else {
		u.entries = removeEntry(u.entries, n)
		m.forget(n)
	}
	// u's place in byDue, filed under its first entry, moves only when that changes.
	if first == n {
		m.byDue = removeByDue(m.byDue, u)
	}
	n.set(e)
	moved := first == nil || first == n || entryBefore(n, first)
	if moved && first != nil && first != n {
		m.byDue = removeByDue(m.byDue, u)
	}
	u.entries = insertEntry(u.entries, n)
	if moved {
		u.first = firstEntry(u.entries)
		m.byDue = insertByDue(m.byDue, u)
	}
	m.requeue(u, had)
}

// drop removes u's entry n. O(log n).
func (m *Memory) drop(u *user, n *node) {
	m.forget(n)
	m.drops++
	if n == u.first {
		m.byDue = removeByDue(m.byDue, u)
	}
	u.entries = removeEntry(u.entries, n)
	u.keys = keyTree.remove(u.keys, n)
	if n == u.first {
		u.first = firstEntry(u.entries)
		if u.first != nil {
			m.byDue = insertByDue(m.byDue, u)
		}
	}
	m.requeue(u, true)
}

// current returns tc's entry named by c while c is its current claim, or nil. O(1)
// expected: it finds the entry by c's token.
func (m *Memory) current(tc tenancy.Context, c Claim) (*user, *node) {
	h, ok := m.claims[c.Token]
	if !ok || h.u.id != tc.UserID() || h.n.workKey != c.Entry.WorkKey {
		return nil, nil
	}
	return h.u, h.n
}

// remember files n, u's entry, under the claim token it has just been given.
func (m *Memory) remember(u *user, n *node) {
	m.claims[n.token] = claimed{u, n}
	m.claimsPeak = max(m.claimsPeak, len(m.claims))
}

// forget takes n's claim, if it has one, out of m.claims; the caller is about to clear or
// replace n's token, or drop n.
func (m *Memory) forget(n *node) {
	if n.token == 0 {
		return
	}
	delete(m.claims, n.token)
	if len(m.claims) == 0 && m.claimsPeak > maxScratch {
		m.claims, m.claimsPeak = map[uint64]claimed{}, 0
	}
}

// Schedule inserts or replaces tc's entry e.WorkKey. O(log n).
func (m *Memory) Schedule(ctx context.Context, tc tenancy.Context, e Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.user(e.UserID)
	m.put(u, u.lookup(e.WorkKey), e)
	return nil
}

// ScheduleMissing inserts those of entries whose WorkKey tc does not have yet, all under
// one lock, and returns how many. O(len(entries) · log n).
func (m *Memory) ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []Entry) (int, error) {
	if err := ValidateEntries(tc, entries); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	added := 0
	for _, e := range entries {
		if u := m.users[e.UserID]; u == nil || u.lookup(e.WorkKey) == nil {
			m.put(m.user(e.UserID), nil, e)
			added++
		}
	}
	return added, nil
}

// Unschedule removes tc's entry workKey whatever its claim. O(log n).
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
	if u := m.users[tc.UserID()]; u != nil {
		if n := u.lookup(workKey); n != nil {
			m.drop(u, n)
		}
	}
	return nil
}

// Get returns tc's entry workKey or ErrNotFound. O(log n).
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
			return n.entry(u), nil
		}
	}
	return Entry{}, fmt.Errorf("duework: Get %q: %w", workKey, ErrNotFound)
}

// Complete writes next and ends the claim while c is the entry's current claim, else
// returns ErrClaimLost. O(log n).
func (m *Memory) Complete(ctx context.Context, tc tenancy.Context, c Claim, next Entry) error {
	if err := ValidateCompletion(tc, c, next); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.complete(tc, c, next)
}

func (m *Memory) complete(tc tenancy.Context, c Claim, next Entry) error {
	u, n := m.current(tc, c)
	if n == nil {
		return fmt.Errorf("duework: Complete %q with token %d: %w", next.WorkKey, c.Token, ErrClaimLost)
	}
	m.put(u, n, next)
	return nil
}

// CompleteMany completes each item as Complete would, one after another, all under one
// lock. It fails as a whole only when ctx is done before it starts, having written
// nothing. O(len(done) · log n).
func (m *Memory) CompleteMany(ctx context.Context, done []Done) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs := make([]error, len(done))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, d := range done {
		if err := ValidateCompletion(d.Tenant, d.Claim, d.Next); err != nil {
			errs[i] = err
			continue
		}
		errs[i] = m.complete(d.Tenant, d.Claim, d.Next)
	}
	return errs, nil
}

// CheckClaim returns nil while c is the current claim of tc's entry, else ErrClaimLost.
// O(log n).
func (m *Memory) CheckClaim(ctx context.Context, tc tenancy.Context, c Claim) error {
	if err := ValidateClaim(tc, c); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, n := m.current(tc, c); n == nil {
		return fmt.Errorf("duework: CheckClaim %q with token %d: %w", c.Entry.WorkKey, c.Token, ErrClaimLost)
	}
	return nil
}

// UnscheduleClaimed removes tc's entry while c is its current claim, else returns
// ErrClaimLost and removes nothing. O(log n).
func (m *Memory) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c Claim) error {
	if err := ValidateClaim(tc, c); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, n := m.current(tc, c)
	if n == nil {
		return fmt.Errorf("duework: UnscheduleClaimed %q with token %d: %w", c.Entry.WorkKey, c.Token, ErrClaimLost)
	}
	m.drop(u, n)
	return nil
}
