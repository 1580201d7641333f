package duework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

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
// and Claim; so do Get and each item of StartClaims, and Route
// per user. Ready costs O(log n), then for each user it reads, or passes over because it
// is held, O(1) and O(log c) for c current claims of that user, plus O(PerUser · log n)
// for each user's entries — never the number of users ready nor the depth of anyone's
// backlog. A limited user costs what an unlimited one does: each user keeps its current
// claims in a tree of their ends, so that its in-flight count and the instant a slot frees
// cost O(log c), and its rate mark and stride position are two fields of it. A paused user
// costs a Ready nothing: its Turn is at least the end of its pause, so it waits later in
// its queue, as a limited user does. Release costs O(1) per user, Groups O(log n) per
// group, User O(log n), Entries O(log n) plus O(1) per entry it returns, Paused O(log n)
// plus O(1) per pause it returns or passes over because it has ended. DueBefore costs
// O(log n) per entry it returns, plus O(log n) for each user it passes over because the
// entries it has due are all claimed.
//
// A stored entry takes 128 bytes of heap beyond its work key, which Memory shares with the
// caller (a tier name is kept once however many entries have it), and 72 more while it is
// claimed (its record in its user's tree of claims, and its slot in the pages of claims by
// token, 2 KB for 256 consecutive tokens); each user, kept for good, about 210 more beyond
// its ID, 24 to 48 while it has entries (its slot in the heap of users by first DueAt,
// which grows by doubling), 576 from its second entry until it has none (the array of its
// first entries, its front), and 64 while its pause counts.
//
// Memory keeps every time of years 1 to 9999 UTC exactly, to the nanosecond, and returns it
// in UTC, without a monotonic clock reading; compare times with Equal. Its flow-control
// arithmetic is exact at that precision and saturates as the contract says, whatever
// Every and Burst are.
type Memory struct {
	mu     sync.Mutex
	users  map[string]*user
	groups map[string]*user // each group's users with entries, by (Turn, UserID)
	byDue  dueUsers         // users with entries, by (earliest DueAt, UserID)
	tokens uint64           // the last token handed out; only grows

	// claims finds each entry that has a claim by its token, so that a completion costs no
	// walk down its user's keys tree. It holds exactly the nodes that have a claim, each as
	// the ticket that files it in its user's tree of claims. spare lists, through kid[0], up
	// to maxScratch tickets of ended claims for the next claims to reuse, spares of them.
	claims tokenPages
	spare  *ticket
	spares int

	// paused holds the users' pauses by UserID, each of which counts: the sparse set
	// Paused pages through.
	paused *pause

	// Ready's working space, kept between calls so that a read allocates only its result.
	queue   cursor[user, groupOrder]
	walk    cursor[node, entryOrder]
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
		walk:   cursor[node, entryOrder]{prune: laterThan},
	}
}

// put stores e as u's entry n (nil: a new one), unclaimed. O(log n).
func (m *Memory) put(u *user, n *node, e Entry) {
	had, first := u.first != nil, u.first
	if n == nil {
		n = &node{workKey: e.WorkKey, tier: noTier, prio: rand.Uint32()}
		u.keys = byKey.insert(u.keys, n)
	} else {
		u.unfile(n)
		m.forget(n)
	}
	n.set(e)
	u.file(n)
	u.settle()
	// u's place in byDue, filed under its first entry, moves only when that changes.
	if u.first != first || first == n {
		m.byDue.file(u)
	}
	m.requeue(u, had)
}

// drop removes u's entry n. O(log n).
func (m *Memory) drop(u *user, n *node) {
	m.forget(n)
	m.drops++
	first := u.first
	u.unfile(n)
	u.keys = byKey.remove(u.keys, n)
	u.settle()
	switch {
	case u.first == nil:
		m.byDue.remove(u)
	case u.first != first || first == n:
		m.byDue.file(u)
	}
	m.requeue(u, true)
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
	d := Done{Tenant: tc, Claim: c, Next: next}
	if err := d.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.complete(d)
}

// complete validates d and completes it. A current claim's entry is one Memory stores, so
// its WorkKey, and its tier when Next keeps it, were validated when it was stored and are
// not checked again; an item whose claim is not current is validated in full, so that it
// gets ErrInvalid before ErrClaimLost.
func (m *Memory) complete(d Done) error {
	t := m.current(d.Tenant, d.Claim)
	if t == nil {
		if err := d.Validate(); err != nil {
			return err
		}
		return fmt.Errorf("duework: Complete %q with token %d: %w", d.Next.WorkKey, d.Claim.Token, ErrClaimLost)
	}
	if err := d.validate(t.n.workKey, t.n.tier.Value()); err != nil {
		return err
	}
	m.put(t.u, t.n, d.Next)
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
	for i := 0; i < len(done); i += warmBatch {
		m.warm(done[i:min(i+warmBatch, len(done))])
	}
	for i := range done {
		errs[i] = m.complete(done[i])
	}
	return errs, nil
}

// warmBatch is how many completions warm reads at once.
const warmBatch = 32

// warm reads, ahead of completing them, the path down its user's entries tree that each of
// done (at most warmBatch) will walk to file its next DueAt there: one step of every path
// in turn, so that the reads of different paths, which depend on nothing of each other's,
// wait on memory together and not one after another as the completions' own walks would.
// It writes nothing; an item whose claim is not current, or whose user has no tree, is
// passed over. O(len(done) · log n).
func (m *Memory) warm(done []Done) {
	var at [warmBatch]*node
	var sec [warmBatch]int64
	var nsec [warmBatch]int32
	k := 0
	for i := range done {
		t := m.claims.get(done[i].Claim.Token)
		if t == nil || t.u.entries == nil {
			continue
		}
		at[k] = t.u.entries
		sec[k], nsec[k] = splitTime(done[i].Next.DueAt)
		k++
	}
	for k > 0 {
		live := 0
		for i := range k {
			n := at[i]
			if n == nil {
				continue
			}
			// Ties of DueAt go right: the walk only has to pass near the path.
			if sec[i] < n.dueSec || sec[i] == n.dueSec && nsec[i] < n.dueNsec {
				at[i] = n.kid[0]
			} else {
				at[i] = n.kid[1]
			}
			live++
		}
		if live == 0 {
			return
		}
	}
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
	if u.first != nil {
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
	walkAfter[node, keyOrder](u.keys, after, func(n *node) bool {
		es := EntryState{Entry: n.entry(u)}
		if n.claim != nil {
			es.ClaimedUntil = joinTime(n.visSec, n.visNsec)
		}
		out = append(out, es)
		return len(out) < limit
	})
	return out, nil
}

// validateUserID checks a user ID by tenancy.ValidateID's rules, wrapping ErrInvalid.
func validateUserID(id string) error { return vocab.Name(ErrInvalid, "UserID", id) }
