package indextest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Model is a reference duework.Index: maps and sorts written straight from the contract,
// flow control included, so that it is obviously right, and every call costs O(n log n) in
// everything stored. The state-machine rule compares the Index under test with it, and
// tests of code built on an Index (a dispatcher, a runner) can use it as the Index whose
// answers they trust. It is not for production.
//
// It is safe for concurrent use, keeps every time exactly (its arithmetic on times is on
// exact integers, so that no Every or Burst overflows it), and returns times in UTC
// without a monotonic clock reading.
type Model struct {
	mu     sync.Mutex
	rows   map[duework.Key]*modelRow
	users  map[string]*modelUser
	tokens uint64 // the last token handed out
}

type modelRow struct {
	e       duework.Entry
	token   uint64 // the current claim's token; 0 when unclaimed
	until   time.Time
	started bool // the current claim is started
}

type modelUser struct {
	group      string
	limits     duework.Limits
	lastServed time.Time
	pass       time.Time // the stride position
	mark       time.Time // the rate mark; zero until the first claim with Every > 0
	heldUntil  time.Time // zero when not held
	paused     time.Time // PausedUntil as stored; zero for none
	reason     string
}

// pauseCounts reports whether u's stored pause counts: it ends after u's LastServed.
func (u *modelUser) pauseCounts() bool { return u.paused.After(u.lastServed) }

// pausedAt reports whether u is paused at now: its pause counts and ends after now.
func (u *modelUser) pausedAt(now time.Time) bool { return u.pauseCounts() && u.paused.After(now) }

var _ duework.Index = (*Model)(nil)

// NewModel returns an empty reference Index.
func NewModel() *Model {
	return &Model{rows: map[duework.Key]*modelRow{}, users: map[string]*modelUser{}}
}

// lock takes the Model's mutex unless ctx is done; the caller unlocks.
func (m *Model) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	return nil
}

// norm is how the Model returns a time: UTC, no monotonic reading.
func norm(t time.Time) time.Time { return t.Round(0).UTC() }

func normEntry(e duework.Entry) duework.Entry {
	e.DueAt, e.LastRunAt = norm(e.DueAt), norm(e.LastRunAt)
	return e
}

// visible reports whether r is visible at now: due, and unclaimed or its claim ended.
func (r *modelRow) visible(now time.Time) bool {
	return !r.e.DueAt.After(now) && (r.token == 0 || !r.until.After(now))
}

// visibleAt is the earliest instant at which r is visible.
func (r *modelRow) visibleAt() time.Time {
	if r.token != 0 && r.until.After(r.e.DueAt) {
		return r.until
	}
	return r.e.DueAt
}

// nanos returns t as nanoseconds since vocab.MinTime: exact, where a time.Duration would
// overflow past 292 years.
func nanos(t time.Time) *big.Int {
	n := big.NewInt(t.Unix() - vocab.MinTime.Unix())
	n.Mul(n, big.NewInt(int64(time.Second)))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

// fromNanos inverts nanos, clamping to [vocab.MinTime, vocab.MaxTime].
func fromNanos(n *big.Int) time.Time {
	switch {
	case n.Sign() < 0:
		return vocab.MinTime
	case n.Cmp(nanos(vocab.MaxTime)) > 0:
		return vocab.MaxTime
	}
	sec, nsec := new(big.Int).QuoRem(n, big.NewInt(int64(time.Second)), new(big.Int))
	return time.Unix(sec.Int64()+vocab.MinTime.Unix(), nsec.Int64()).UTC()
}

// times returns k·d as an exact number of nanoseconds.
func times(k int, d time.Duration) *big.Int {
	return new(big.Int).Mul(big.NewInt(int64(k)), big.NewInt(int64(d)))
}

// laterOf returns the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// readyAts returns the ReadyAt of every user with entries: the greatest of the least
// visible-at instant of its entries, the MaxInFlight-th latest Until among its current
// claims when it has that many, its rate mark − (b−1)·Every, and its PausedUntil while its
// pause counts. One pass over the rows.
func (m *Model) readyAts() map[string]time.Time {
	first := map[string]time.Time{}
	untils := map[string][]time.Time{}
	for k, r := range m.rows {
		if v, ok := first[k.UserID]; !ok || r.visibleAt().Before(v) {
			first[k.UserID] = r.visibleAt()
		}
		if r.token != 0 {
			untils[k.UserID] = append(untils[k.UserID], r.until)
		}
	}
	for id, at := range first {
		l := m.users[id].limits
		if us := untils[id]; l.MaxInFlight > 0 && len(us) >= l.MaxInFlight {
			slices.SortFunc(us, func(a, b time.Time) int { return b.Compare(a) }) // latest first
			at = laterOf(at, us[l.MaxInFlight-1])
		}
		if l.Every > 0 {
			next := new(big.Int).Sub(nanos(m.users[id].mark), times(max(l.Burst, 1)-1, l.Every))
			at = laterOf(at, fromNanos(next)) // clamped at vocab.MinTime, which at is never before
		}
		if u := m.users[id]; u.pauseCounts() {
			at = laterOf(at, u.paused)
		}
		first[id] = at
	}
	return first
}

// turns returns the Turn of every user with entries: max(ReadyAt, pass).
func (m *Model) turns() map[string]time.Time {
	out := m.readyAts()
	for id, at := range out {
		out[id] = laterOf(at, m.users[id].pass)
	}
	return out
}

// room returns how many more of user id's entries its limits let be claimed at now, given
// its in-flight count then: 0 while it is paused, else MaxInFlight less that count, and
// the rate's allowance, b when the mark is not after now and else max(0, b − ceil((mark −
// now)/Every)); math.MaxInt for no limit.
func (m *Model) room(id string, now time.Time, inFlight int) int {
	l, u := m.users[id].limits, m.users[id]
	if u.pausedAt(now) {
		return 0
	}
	room := math.MaxInt
	if l.MaxInFlight > 0 {
		room = max(0, l.MaxInFlight-inFlight)
	}
	if l.Every > 0 {
		b := max(l.Burst, 1)
		a := b
		if u.mark.After(now) {
			d := new(big.Int).Sub(nanos(u.mark), nanos(now))
			e := big.NewInt(int64(l.Every))
			q := new(big.Int).Div(d.Add(d, new(big.Int).Sub(e, big.NewInt(1))), e) // the ceiling
			if a = 0; q.Cmp(big.NewInt(int64(b))) < 0 {
				a = b - int(q.Int64())
			}
		}
		room = min(room, a)
	}
	return room
}

// heldIn counts the users of group that are ready and held at now.
func (m *Model) heldIn(group string, now time.Time) int {
	n := 0
	for id, turn := range m.turns() {
		if u := m.users[id]; u.group == group && !turn.After(now) && u.heldUntil.After(now) {
			n++
		}
	}
	return n
}

// visibleOf returns the entries visible at now of each of users, in (DueAt, WorkKey)
// order.
func (m *Model) visibleOf(users map[string]bool, now time.Time) map[string][]duework.Entry {
	out := map[string][]duework.Entry{}
	for k, r := range m.rows {
		if users[k.UserID] && r.visible(now) {
			out[k.UserID] = append(out[k.UserID], normEntry(r.e))
		}
	}
	for _, es := range out {
		sortDue(es) // one user's: (DueAt, WorkKey) order
	}
	return out
}

// Schedule inserts or replaces tc's entry e.WorkKey, ending its claim.
func (m *Model) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.schedule(e)
	return nil
}

func (m *Model) schedule(e duework.Entry) {
	if m.users[e.UserID] == nil {
		m.users[e.UserID] = &modelUser{}
	}
	m.rows[e.Key()] = &modelRow{e: normEntry(e)}
}

// ScheduleMissing inserts those of entries that tc does not have yet.
func (m *Model) ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (int, error) {
	if err := tc.Check(); err != nil {
		return 0, err
	}
	if err := vocab.Each("entries", entries, func(e duework.Entry) error { return e.Validate(tc) }); err != nil {
		return 0, err
	}
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	added := 0
	for _, e := range entries {
		if m.rows[e.Key()] == nil {
			m.schedule(e)
			added++
		}
	}
	return added, nil
}

// Unschedule removes tc's entry workKey whatever its claim.
func (m *Model) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := vocab.Name(duework.ErrInvalid, "WorkKey", workKey); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.rows, duework.Key{UserID: tc.UserID(), WorkKey: workKey})
	return nil
}

// Get returns tc's entry workKey or duework.ErrNotFound.
func (m *Model) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	if err := tc.Check(); err != nil {
		return duework.Entry{}, err
	}
	if err := vocab.Name(duework.ErrInvalid, "WorkKey", workKey); err != nil {
		return duework.Entry{}, err
	}
	if err := m.lock(ctx); err != nil {
		return duework.Entry{}, err
	}
	defer m.mu.Unlock()
	r := m.rows[duework.Key{UserID: tc.UserID(), WorkKey: workKey}]
	if r == nil {
		return duework.Entry{}, fmt.Errorf("indextest: Model.Get %q: %w", workKey, duework.ErrNotFound)
	}
	return normEntry(r.e), nil
}

// Complete writes next and ends the claim while c is the entry's current claim.
func (m *Model) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	if err := (duework.Done{Tenant: tc, Claim: c, Next: next}).Validate(); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	return m.complete(c, next)
}

func (m *Model) complete(c duework.Claim, next duework.Entry) error {
	r := m.current(c)
	if r == nil {
		return fmt.Errorf("indextest: Model.Complete %q with token %d: %w", next.WorkKey, c.Token, duework.ErrClaimLost)
	}
	*r = modelRow{e: normEntry(next)}
	return nil
}

// current returns c's row while c is its current claim, or nil.
func (m *Model) current(c duework.Claim) *modelRow {
	r := m.rows[c.Entry.Key()]
	if r == nil || r.token == 0 || r.token != c.Token {
		return nil
	}
	return r
}

// CompleteMany completes each item as Complete would, one after another.
func (m *Model) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	errs := make([]error, len(done))
	for i, d := range done {
		if err := d.Validate(); err != nil {
			errs[i] = err
			continue
		}
		errs[i] = m.complete(d.Claim, d.Next)
	}
	return errs, nil
}

// UnscheduleClaimed removes tc's entry while c is its current claim, else ErrClaimLost.
func (m *Model) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if err := (duework.Unclaim{Tenant: tc, Claim: c}).Validate(); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.current(c) == nil {
		return fmt.Errorf("indextest: Model.UnscheduleClaimed %q with token %d: %w", c.Entry.WorkKey, c.Token, duework.ErrClaimLost)
	}
	delete(m.rows, c.Entry.Key())
	return nil
}

// DueBefore returns at most limit entries visible at now in (DueAt, UserID, WorkKey) order.
func (m *Model) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []duework.Entry
	for _, r := range m.rows {
		if r.visible(now) {
			out = append(out, normEntry(r.e))
		}
	}
	sortDue(out)
	return out[:min(limit, len(out))], nil
}

// Ready returns the next ready, unheld users of q.Group in (Turn, UserID) order.
func (m *Model) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	if err := q.Validate(); err != nil {
		return duework.ReadyPage{}, err
	}
	if err := m.lock(ctx); err != nil {
		return duework.ReadyPage{}, err
	}
	defer m.mu.Unlock()
	type cand struct {
		id   string
		turn time.Time
	}
	var cands []cand
	for id, turn := range m.turns() {
		if u := m.users[id]; u.group == q.Group && !u.heldUntil.After(q.Now) && !turn.After(q.Now) {
			cands = append(cands, cand{id, turn})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(a.turn.Compare(b.turn), strings.Compare(a.id, b.id)) })
	var page duework.ReadyPage
	if len(cands) > q.Users {
		page.Next = norm(cands[q.Users].turn)
		cands = cands[:q.Users]
	}
	read := map[string]bool{}
	for _, c := range cands {
		read[c.id] = true
	}
	visible, inFlight := m.visibleOf(read, q.Now), m.inFlights(q.Now)
	for _, c := range cands {
		u := m.users[c.id]
		due := visible[c.id]
		limit := min(q.PerUser*u.limits.EffectiveWeight(), m.room(c.id, q.Now, inFlight[c.id]))
		h := duework.Head{UserID: c.id, LastServed: norm(u.lastServed), Turn: norm(c.turn), Due: due, More: len(due) > limit,
			Limits: u.limits, InFlight: inFlight[c.id]}
		if h.More {
			h.Due = due[:limit:limit]
		}
		page.Heads = append(page.Heads, h)
		if q.Hold > 0 {
			u.heldUntil = q.Now.Add(q.Hold)
		}
	}
	return page, nil
}

// Route moves each named, stored user to its group.
func (m *Model) Route(ctx context.Context, routes []duework.Route) error {
	if err := vocab.Each("routes", routes, duework.Route.Validate); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for _, r := range routes {
		if u := m.users[r.UserID]; u != nil {
			u.group, u.limits = r.Group, r.Limits
		}
	}
	return nil
}

// Groups returns, sorted, the groups holding a user ready at now.
func (m *Model) Groups(ctx context.Context, now time.Time) ([]string, error) {
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []string
	for id, turn := range m.turns() {
		if g := m.users[id].group; !turn.After(now) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Release ends the holds of the named users that end exactly at heldUntil.
func (m *Model) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	if err := vocab.Time(duework.ErrInvalid, "heldUntil", heldUntil); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for _, id := range userIDs {
		if u := m.users[id]; u != nil && !u.heldUntil.IsZero() && u.heldUntil.Equal(heldUntil) {
			u.heldUntil = time.Time{}
		}
	}
	return nil
}

// served is what one Claim call does for one user: its Turn before the call, how many of
// its entries the call may claim, and how many it has.
type served struct {
	turn        time.Time
	room, count int
}

// Claim claims those of keys that are visible at now and that the users' limits allow,
// until until: each user's keys beyond its room at now (before the call) are skipped, in
// the order of keys; then each user served k entries gets LastServed, its rate mark and
// its pass moved, and its hold ended.
func (m *Model) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if err := vocab.ClaimWindow(duework.ErrInvalid, now, until); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	before, inFlight := m.turns(), m.inFlights(now)
	calls := map[string]*served{}
	var out []duework.Claim
	for _, k := range keys {
		r := m.rows[k]
		if r == nil || !r.visible(now) {
			continue
		}
		c := calls[k.UserID]
		if c == nil {
			c = &served{turn: before[k.UserID], room: m.room(k.UserID, now, inFlight[k.UserID])}
			calls[k.UserID] = c
		}
		if c.count == c.room {
			continue
		}
		c.count++
		m.tokens++
		r.token, r.until, r.started = m.tokens, until, false
		out = append(out, duework.Claim{Entry: normEntry(r.e), Token: r.token, Until: norm(until)})
	}
	for id, c := range calls {
		if c.count > 0 {
			m.serve(m.users[id], c, now)
		}
	}
	return out, nil
}

// serve applies a Claim at now that claimed c.count of u's entries to u (c.turn is T, its
// Turn before the call; a weighted stride starts no earlier than now − w·(now −
// LastServed)), which is the floor of duework.Index's doc: LastServed
// becomes max(LastServed, now); with Every = E > 0 the mark becomes max(mark, now) + k·E,
// at most vocab.MaxTime; the pass becomes max(pass, now) when k ≥ w or T is not before now, and
// otherwise max(pass, T + floor(L·k/w) µs), L = now − T in whole microseconds rounded
// down; the hold ends.
func (m *Model) serve(u *modelUser, c *served, now time.Time) {
	k, w, t := c.count, u.limits.EffectiveWeight(), c.turn
	if k < w && !u.lastServed.IsZero() && u.lastServed.Before(now) {
		// The stride starts no earlier than now − 3w·(now − LastServed), at least vocab.MinTime.
		gap := new(big.Int).Sub(nanos(now), nanos(u.lastServed))
		t = laterOf(t, fromNanos(new(big.Int).Sub(nanos(now), gap.Mul(gap, big.NewInt(3*int64(w))))))
	}
	u.lastServed = laterOf(u.lastServed, now)
	if e := u.limits.Every; e > 0 {
		u.mark = fromNanos(new(big.Int).Add(nanos(laterOf(u.mark, now)), times(k, e)))
	}
	if k >= w || !t.Before(now) {
		u.pass = laterOf(u.pass, now)
	} else {
		micro := big.NewInt(int64(time.Microsecond))
		l := new(big.Int).Div(new(big.Int).Sub(nanos(now), nanos(t)), micro)
		s := new(big.Int).Div(new(big.Int).Mul(l, big.NewInt(int64(k))), big.NewInt(int64(w)))
		u.pass = laterOf(u.pass, fromNanos(new(big.Int).Add(nanos(t), s.Mul(s, micro))))
	}
	u.heldUntil = time.Time{}
}

// StartClaims marks started each claim that is current, with its own Until, and not
// started yet, one after another.
func (m *Model) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	return m.eachClaim(ctx, "StartClaims", claims, func(r *modelRow, c duework.Claim) error {
		switch {
		case !r.until.Equal(c.Until):
			return duework.ErrClaimLost
		case r.started:
			return duework.ErrClaimStarted
		}
		r.started = true
		return nil
	})
}

// Unclaim ends each claim that is still current and not started, and leaves its entry as
// it is.
func (m *Model) Unclaim(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	return m.eachClaim(ctx, "Unclaim", claims, func(r *modelRow, _ duework.Claim) error {
		if r.started {
			return duework.ErrClaimStarted
		}
		r.token, r.until = 0, time.Time{}
		return nil
	})
}

// eachClaim calls act with the row of each claim that is current, one after another, and
// returns each item's outcome: its validation error, ErrClaimLost when it is not current,
// else act's.
func (m *Model) eachClaim(ctx context.Context, op string, claims []duework.Unclaim, act func(*modelRow, duework.Claim) error) ([]error, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	errs := make([]error, len(claims))
	for i, c := range claims {
		if err := c.Validate(); err != nil {
			errs[i] = err
			continue
		}
		err := duework.ErrClaimLost
		if r := m.current(c.Claim); r != nil {
			err = act(r, c.Claim)
		}
		if err != nil {
			errs[i] = fmt.Errorf("indextest: Model.%s %q with token %d: %w", op, c.Claim.Entry.WorkKey, c.Claim.Token, err)
		}
	}
	return errs, nil
}

// User returns userID's place in its queue at now.
func (m *Model) User(ctx context.Context, userID string, now time.Time) (duework.UserState, error) {
	if err := vocab.Name(duework.ErrInvalid, "UserID", userID); err != nil {
		return duework.UserState{}, err
	}
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return duework.UserState{}, err
	}
	if err := m.lock(ctx); err != nil {
		return duework.UserState{}, err
	}
	defer m.mu.Unlock()
	u := m.users[userID]
	if u == nil {
		return duework.UserState{}, fmt.Errorf("indextest: Model.User %q: %w", userID, duework.ErrNotFound)
	}
	st := duework.UserState{Group: u.group, Limits: u.limits, LastServed: norm(u.lastServed), InFlight: m.inFlight(userID, now)}
	if turn, ok := m.turns()[userID]; ok {
		st.Turn = norm(turn)
	}
	if u.heldUntil.After(now) {
		st.HeldUntil = norm(u.heldUntil)
	}
	if u.pausedAt(now) {
		st.PausedUntil, st.PauseReason = norm(u.paused), u.reason
	}
	return st, nil
}

// inFlight counts user's current claims whose Until is after now.
func (m *Model) inFlight(user string, now time.Time) int { return m.inFlights(now)[user] }

// inFlights counts every user's current claims whose Until is after now.
func (m *Model) inFlights(now time.Time) map[string]int {
	n := map[string]int{}
	for k, r := range m.rows {
		if r.token != 0 && r.until.After(now) {
			n[k.UserID]++
		}
	}
	return n
}

// Entries returns up to limit of userID's entries after after, in WorkKey order.
func (m *Model) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	if err := vocab.Name(duework.ErrInvalid, "UserID", userID); err != nil {
		return nil, err
	}
	if after != "" {
		if err := vocab.Name(duework.ErrInvalid, "WorkKey", after); err != nil {
			return nil, fmt.Errorf("after: %w", err)
		}
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []duework.EntryState
	for k, r := range m.rows {
		if k.UserID == userID && k.WorkKey > after {
			es := duework.EntryState{Entry: normEntry(r.e)}
			if r.token != 0 {
				es.ClaimedUntil = norm(r.until)
			}
			out = append(out, es)
		}
	}
	slices.SortFunc(out, func(a, b duework.EntryState) int { return strings.Compare(a.Entry.WorkKey, b.Entry.WorkKey) })
	return out[:min(limit, len(out)):min(limit, len(out))], nil
}

// Pause stores the later of tc's user's pause and until, with the later's reason (the new
// one on a tie), storing the user first if it is new.
func (m *Model) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := (duework.UserPause{UserID: tc.UserID(), Reason: reason, Until: until}).Validate(); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	u := m.users[tc.UserID()]
	if u == nil {
		u = &modelUser{}
		m.users[tc.UserID()] = u
	}
	if !until.Before(u.paused) {
		u.paused, u.reason = norm(until), reason
	}
	return nil
}

// Resume drops tc's user's pause.
func (m *Model) Resume(ctx context.Context, tc tenancy.Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if u := m.users[tc.UserID()]; u != nil {
		u.paused, u.reason = time.Time{}, ""
	}
	return nil
}

// Paused returns up to limit of the users paused at now whose IDs sort after after, in
// UserID order.
func (m *Model) Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error) {
	if after != "" {
		if err := vocab.Name(duework.ErrInvalid, "after", after); err != nil {
			return nil, err
		}
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []duework.UserPause
	for id, u := range m.users {
		if id > after && u.pausedAt(now) {
			out = append(out, duework.UserPause{UserID: id, Reason: u.reason, Until: norm(u.paused)})
		}
	}
	slices.SortFunc(out, func(a, b duework.UserPause) int { return strings.Compare(a.UserID, b.UserID) })
	return out[:min(limit, len(out)):min(limit, len(out))], nil
}

// hasEntries reports whether user id has entries.
func (m *Model) hasEntries(id string) bool {
	for k := range m.rows {
		if k.UserID == id {
			return true
		}
	}
	return false
}
