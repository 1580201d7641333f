package duework

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Memory is the in-memory Index: the embedded default for a service that runs on one
// machine. Make one with NewMemory. It is safe for concurrent use: every call takes one
// mutex. It enforces every user's Limits at Claim, whoever claims, as the Index contract
// says.
//
// With n entries stored, each write costs O(log n): Schedule, Unschedule, Complete,
// UnscheduleClaimed, Pause, Resume, and each item of ScheduleMissing, CompleteMany, Unclaim
// and Claim; so do Get, CheckClaim and each item of CheckClaims and StartClaims, and Route
// per user. Ready costs
// O(log n), then for each user it reads, or passes over because it is held, O(1) and
// O(log c) for c current claims of that user, plus O(PerUser · log n) for each user's
// entries — never the number of users ready nor the depth of anyone's backlog. A limited
// user costs what an unlimited one does: each user keeps its current claims in a tree of
// their ends, so that its in-flight count and the instant a slot frees cost O(log c), and
// its rate mark and stride position are two fields of it. Release costs O(1) per user,
// Groups O(log n) per group, User O(log n), Entries O(log n) plus O(1) per entry it
// returns, Paused O(log n) plus O(1) per pause it returns or passes over because it has
// ended. A paused user costs a Ready nothing: its Turn is at least the end of its pause, so
// it waits later in its queue, as a limited user does. DueBefore costs O(log n) per entry it returns, plus O(log n) for each user it
// passes over because the entries it has due are all claimed.
//
// A stored entry takes 128 bytes of heap beyond its work key, which Memory shares with the
// caller (a tier name is kept once however many entries have it), and about 75 more while
// it is claimed (its record in its user's tree of claims and in the map of claims by
// token); each user, kept for good, about 210 more beyond its ID, and 64 while its pause
// counts.
//
// Memory keeps every time of years 1 to 9999 UTC exactly, to the nanosecond, and returns it
// in UTC, without a monotonic clock reading; compare times with Equal. Its flow-control
// arithmetic is exact at that precision and saturates as the contract says, whatever
// Every and Burst are.
type Memory struct {
	mu     sync.Mutex
	users  map[string]*user
	groups map[string]*user // each group's users with entries, by (Turn, UserID)
	byDue  *user            // users with entries, by (earliest DueAt, UserID)
	tokens uint64           // the last token handed out; only grows

	// claims finds each entry that has a claim by its token, so that a completion costs no
	// walk down its user's keys tree. It holds exactly the nodes whose token is not 0, each
	// as the ticket that files it in its user's tree of claims. claimsPeak is its most
	// entries since it was made: a map never shrinks, so once one that grew past
	// maxScratch empties it is made anew. spare lists, through kid[0], up to maxScratch
	// tickets of ended claims for the next claims to reuse, spares of them.
	claims     map[uint64]*ticket
	claimsPeak int
	spare      *ticket
	spares     int

	// paused holds the users whose pause counts, or counted until a write that did not
	// look, by UserID: the sparse set Paused pages through.
	paused *pause

	// Ready's working space, kept between calls so that a read allocates only its result.
	queue   cursor[user]
	walk    cursor[node]
	picks   []pick
	touched []*user // Claim's: the users it has claimed for, each once

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

var _ Index = (*Memory)(nil)

// NewMemory returns an empty in-memory Index.
func NewMemory() *Memory {
	return &Memory{
		users:  map[string]*user{},
		groups: map[string]*user{},
		claims: map[uint64]*ticket{},
		queue:  cursor[user]{t: &groupTree},
		walk:   cursor[node]{t: &entryTree, prune: laterThan},
	}
}

// node is one stored entry: in its user's entries tree, ordered by (DueAt, WorkKey) and
// augmented with the least visible-at instant of its subtree, and in its user's keys tree.
// Times are seconds since vocab.MinTime plus nanoseconds, so the zero value is the zero
// time and every time in [vocab.MinTime, vocab.MaxTime] is kept exactly. Its tier is
// interned, one copy per distinct tier name. It has no pointer to its user: every path to
// a node comes through the user. It fills one 128-byte size class.
type node struct {
	workKey  string
	tier     unique.Handle[string]
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
	streak   int32 // MissStreak
	errors   int32 // ErrorStreak
	prio     uint32
}

// user is one tenant's part of the index. It is in its group's tree and in Memory.byDue
// exactly when it has entries. It fills one 192-byte size class.
type user struct {
	id      string
	group   string
	entries *node    // by (DueAt, WorkKey)
	keys    *node    // by WorkKey
	first   *node    // the entries tree's first node; nil when it is empty
	claims  *ticket  // its current claims by (Until, token); nil while it has none
	gkid    [2]*user // links in the group's tree
	dkid    [2]*user // links in Memory.byDue
	every   time.Duration
	// servedSec and servedNsec are LastServed, heldSec and heldNsec the hold's end, passSec
	// and passNsec the stride position, rateSec and rateNsec the rate mark; zero for never
	// and none. turnSec and turnNsec are the Turn the user is filed under in its group's
	// tree, while it is there.
	servedSec  int64
	heldSec    int64
	turnSec    int64
	passSec    int64
	rateSec    int64
	servedNsec int32
	heldNsec   int32
	turnNsec   int32
	passNsec   int32
	rateNsec   int32
	// weight, maxInFlight, burst and every are its Limits, which Validate bounds.
	weight      int32
	maxInFlight int32
	burst       int32
	prio        uint32
	called      int32 // its entries the running Claim has claimed; 0 between calls
	pause       *pause
}

// pause is a user's stored pause, made by its first Pause and kept while it counts (see
// Index, Pauses): the user's ReadyAt is at least its until while until is after the user's
// LastServed. It is in Memory.paused, a tree ordered by UserID, for as long as it is kept,
// so that Paused costs what it returns plus the ended pauses it passes over.
type pause struct {
	u      *user
	reason string
	kid    [2]*pause
	sec    int64
	nsec   int32
	prio   uint32
}

// counts reports whether p, u's pause, still counts: its until is after u's LastServed.
func (p *pause) counts() bool {
	return cmpTime(p.sec, p.nsec, p.u.servedSec, p.u.servedNsec) > 0
}

// pausedAt reports whether u is paused at now (sec, nsec): it has a pause that counts and
// ends after now.
func (u *user) pausedAt(sec int64, nsec int32) bool {
	p := u.pause
	return p != nil && cmpTime(p.sec, p.nsec, sec, nsec) > 0 && p.counts()
}

// claimed is an entry with its user.
type claimed struct {
	u *user
	n *node
}

// pick is one head of a Ready being built: its user, the end of its nodes in Memory.read,
// whether it has more visible entries, and its in-flight count.
type pick struct {
	u        *user
	end      int
	more     bool
	inFlight int
}

// minUnix is vocab.MinTime as Unix seconds: stored seconds count from it.
var minUnix = vocab.MinTime.Unix()

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

// noTier is the tier of an entry without one, and of a node not yet set.
var noTier = unique.Make("")

// set copies e's fields into n and leaves it unclaimed; the identity (user, workKey) stays.
// A tier as n's already is not interned again.
func (n *node) set(e Entry) {
	if n.tier.Value() != e.Tier {
		n.tier = unique.Make(e.Tier)
	}
	n.dueSec, n.dueNsec = splitTime(e.DueAt)
	n.lastSec, n.lastNsec = splitTime(e.LastRunAt)
	n.streak, n.errors = int32(e.MissStreak), int32(e.ErrorStreak)
	n.token = 0
	n.visSec, n.visNsec = n.dueSec, n.dueNsec
}

func (n *node) entry(u *user) Entry {
	return Entry{
		UserID:      u.id,
		WorkKey:     n.workKey,
		Tier:        n.tier.Value(),
		DueAt:       joinTime(n.dueSec, n.dueNsec),
		LastRunAt:   joinTime(n.lastSec, n.lastNsec),
		MissStreak:  int(n.streak),
		ErrorStreak: int(n.errors),
	}
}

// turn computes the user's Turn, max(ReadyAt, pass); the user must have entries. O(log c)
// for c current claims.
func (u *user) turn() (int64, int32) {
	s, n := later(u.entries.minSec, u.entries.minNsec, u.passSec, u.passNsec)
	if m := int(u.maxInFlight); m > 0 {
		if t := latest(u.claims, m); t != nil {
			s, n = later(s, n, t.n.visSec, t.n.visNsec)
		}
	}
	if u.every > 0 {
		rs, rn := u.rateAt()
		s, n = later(s, n, rs, rn)
	}
	if p := u.pause; p != nil && p.counts() {
		s, n = later(s, n, p.sec, p.nsec)
	}
	return s, n
}

// rateAt is the instant the rate lets u be claimed again: mark − (b−1)·Every, clamped at
// vocab.MinTime; u must have Every > 0.
func (u *user) rateAt() (int64, int32) {
	return subScaled(u.rateSec, u.rateNsec, int64(max(u.burst, 1)-1), u.every)
}

// inFlight counts u's current claims whose Until is after now (sec, nsec). O(log c).
func (u *user) inFlight(sec int64, nsec int32) int { return endingAfter(u.claims, sec, nsec) }

// cap returns how many visible entries u's limits let Ready return at now, at most
// perUser × its weight, and its in-flight count then. O(log c).
func (u *user) cap(sec int64, nsec int32, perUser int) (limit, inFlight int) {
	limit = perUser * int(max(u.weight, 1))
	inFlight = u.inFlight(sec, nsec)
	if m := int(u.maxInFlight); m > 0 {
		limit = min(limit, max(0, m-inFlight))
	}
	if u.every > 0 {
		limit = min(limit, allowance(u.rateSec, u.rateNsec, sec, nsec, u.every, int(max(u.burst, 1))))
	}
	return limit, inFlight
}

// allows reports whether u's limits and pause let one more of its entries be claimed at
// now, after the claims made so far. O(log c).
func (u *user) allows(sec int64, nsec int32) bool {
	if u.pause != nil && u.pausedAt(sec, nsec) {
		return false
	}
	if m := int(u.maxInFlight); m > 0 && u.inFlight(sec, nsec) >= m {
		return false
	}
	if u.every > 0 {
		if rs, rn := u.rateAt(); cmpTime(rs, rn, sec, nsec) > 0 {
			return false
		}
	}
	return true
}

// served applies the rest of one claim at now to u: the rate mark, the end of its hold,
// and its count for the running Claim, which lists it on its first (stride, at the end of
// the call, moves LastServed).
func (m *Memory) served(u *user, sec int64, nsec int32) {
	if u.every > 0 {
		rs, rn := later(u.rateSec, u.rateNsec, sec, nsec)
		u.rateSec, u.rateNsec = addScaled(rs, rn, 1, u.every)
	}
	u.heldSec, u.heldNsec = 0, 0
	if u.called == 0 {
		m.touched = append(m.touched, u)
	}
	u.called++
}

// stride moves u's pass and LastServed after a Claim at now that claimed k = u.called of
// its entries, and drops its pause if that ends it. T, its Turn before the call, is still the one it is filed under: Claim
// requeues the users it served only after every stride.
func (m *Memory) stride(u *user, sec int64, nsec int32) {
	k, w := int(u.called), int(max(u.weight, 1))
	u.called = 0
	ts, tn := u.turnSec, u.turnNsec
	if k < w && (u.servedSec != 0 || u.servedNsec != 0) && cmpTime(u.servedSec, u.servedNsec, sec, nsec) < 0 {
		// The stride starts no earlier than now − 3w·(now − LastServed).
		fs, fn := strideFloor(u.servedSec, u.servedNsec, sec, nsec, w)
		ts, tn = later(ts, tn, fs, fn)
	}
	if k >= w || cmpTime(ts, tn, sec, nsec) >= 0 {
		u.passSec, u.passNsec = later(u.passSec, u.passNsec, sec, nsec)
	} else {
		ps, pn := strided(ts, tn, sec, nsec, k, w)
		u.passSec, u.passNsec = later(u.passSec, u.passNsec, ps, pn)
	}
	u.servedSec, u.servedNsec = later(u.servedSec, u.servedNsec, sec, nsec)
	if u.pause != nil {
		m.unpause(u, false) // served at or after its end, the pause no longer counts
	}
}

// limits returns u's Limits as Route stored them.
func (u *user) limits() Limits {
	return Limits{Weight: int(u.weight), MaxInFlight: int(u.maxInFlight), Every: u.every, Burst: int(u.burst)}
}

// setLimits stores l, which Validate accepted.
func (u *user) setLimits(l Limits) {
	u.weight, u.maxInFlight, u.every, u.burst = int32(l.Weight), int32(l.MaxInFlight), l.Every, int32(l.Burst)
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
		n = &node{workKey: e.WorkKey, tier: noTier, prio: rand.Uint32()}
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

// current returns the ticket of tc's entry named by c while c is its current claim, or
// nil. O(1) expected: it finds the entry by c's token.
func (m *Memory) current(tc tenancy.Context, c Claim) *ticket {
	t := m.claims[c.Token]
	if t == nil || t.u.id != tc.UserID() || t.n.workKey != c.Entry.WorkKey {
		return nil
	}
	return t
}

// remember files n, u's entry, under the claim token and Until it has just been given: in
// m.claims and in u's tree of claims. O(log c).
func (m *Memory) remember(u *user, n *node) {
	t := m.spare
	if t != nil {
		m.spare, t.kid[0] = t.kid[0], nil
		m.spares--
	} else {
		t = &ticket{}
	}
	t.u, t.n, t.prio = u, n, n.prio
	u.claims = insertTicket(u.claims, t)
	m.claims[n.token] = t
	m.claimsPeak = max(m.claimsPeak, len(m.claims))
}

// forget ends n's claim, if it has one, in m.claims and in its user's tree of claims; the
// caller is about to clear or replace n's token, or drop n. O(log c).
func (m *Memory) forget(n *node) {
	if n.token == 0 {
		return
	}
	t := m.claims[n.token]
	delete(m.claims, n.token)
	t.u.claims = removeTicket(t.u.claims, t)
	*t = ticket{}
	if m.spares < maxScratch {
		t.kid[0], m.spare = m.spare, t
		m.spares++
	}
	if len(m.claims) == 0 && m.claimsPeak > maxScratch {
		m.claims, m.claimsPeak = map[uint64]*ticket{}, 0
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
	if err := validEntries(tc, entries); err != nil {
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
	if err := validWorkKey(workKey); err != nil {
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
	if err := validWorkKey(workKey); err != nil {
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
	if err := (Done{Tenant: tc, Claim: c, Next: next}).Validate(); err != nil {
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
	t := m.current(tc, c)
	if t == nil {
		return fmt.Errorf("duework: Complete %q with token %d: %w", next.WorkKey, c.Token, ErrClaimLost)
	}
	m.put(t.u, t.n, next)
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
		if err := d.Validate(); err != nil {
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
	if err := (Unclaim{Tenant: tc, Claim: c}).Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.current(tc, c); t == nil || !t.n.claimedUntil(c.Until) {
		return fmt.Errorf("duework: CheckClaim %q with token %d: %w", c.Entry.WorkKey, c.Token, ErrClaimLost)
	}
	return nil
}

// claimedUntil reports whether until is the Until of n's claim, which n keeps as its
// visible-at: the claim made it visible at max(DueAt, Until) = Until.
func (n *node) claimedUntil(until time.Time) bool {
	sec, nsec := splitTime(until)
	return n.visSec == sec && n.visNsec == nsec
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

// CheckClaims checks each claim as CheckClaim would, all under one lock. It fails as a
// whole only when ctx is done before it starts. O(len(claims)).
func (m *Memory) CheckClaims(ctx context.Context, claims []Unclaim) ([]error, error) {
	return m.eachClaim(ctx, "CheckClaims", claims, func(t *ticket, c Claim) error {
		if !t.n.claimedUntil(c.Until) {
			return ErrClaimLost
		}
		return nil
	})
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
	n.token = 0
	n.visSec, n.visNsec = n.dueSec, n.dueNsec
	updateEntry(u.entries, n)
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

// User returns userID's place in its queue at now. O(log n).
func (m *Memory) User(ctx context.Context, userID string, now time.Time) (UserState, error) {
	if err := validateUserID(userID); err != nil {
		return UserState{}, err
	}
	sec, nsec, err := m.lockAt(ctx, now)
	if err != nil {
		return UserState{}, err
	}
	defer m.mu.Unlock()
	u := m.users[userID]
	if u == nil {
		return UserState{}, fmt.Errorf("duework: User %q: %w", userID, ErrNotFound)
	}
	st := UserState{
		Group:      u.group,
		Limits:     u.limits(),
		LastServed: joinTime(u.servedSec, u.servedNsec),
		InFlight:   u.inFlight(sec, nsec),
	}
	if u.entries != nil {
		st.Turn = joinTime(u.turnSec, u.turnNsec)
	}
	if u.heldAt(sec, nsec) {
		st.HeldUntil = joinTime(u.heldSec, u.heldNsec)
	}
	if u.pausedAt(sec, nsec) {
		st.PausedUntil, st.PauseReason = joinTime(u.pause.sec, u.pause.nsec), u.pause.reason
	}
	return st, nil
}

// Entries returns up to limit of userID's entries after after, in WorkKey order. O(log n
// + limit).
func (m *Memory) Entries(ctx context.Context, userID, after string, limit int) ([]EntryState, error) {
	if err := validateUserID(userID); err != nil {
		return nil, err
	}
	if after != "" {
		if err := validWorkKey(after); err != nil {
			return nil, fmt.Errorf("after: %w", err)
		}
	}
	if err := vocab.Limit(ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.users[userID]
	if u == nil {
		return nil, nil
	}
	var out []EntryState
	keysAfter(u.keys, after, func(n *node) bool {
		es := EntryState{Entry: n.entry(u)}
		if n.token != 0 {
			es.ClaimedUntil = joinTime(n.visSec, n.visNsec)
		}
		out = append(out, es)
		return len(out) < limit
	})
	return out, nil
}

// keysAfter calls f with the nodes of the keys tree at root whose WorkKey sorts after
// after, in WorkKey order, until f returns false; it reports whether f asked for more.
func keysAfter(root *node, after string, f func(*node) bool) bool {
	if root == nil {
		return true
	}
	if root.workKey > after {
		if !keysAfter(root.keyKid[0], after, f) || !f(root) {
			return false
		}
	}
	return keysAfter(root.keyKid[1], after, f)
}

// validateUserID checks a user ID by tenancy.ValidateID's rules, wrapping ErrInvalid.
func validateUserID(id string) error { return vocab.Name(ErrInvalid, "UserID", id) }
