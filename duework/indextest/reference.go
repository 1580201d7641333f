package indextest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// Model is a reference duework.Index: maps and sorts written straight from the contract,
// so that it is obviously right, and every call costs O(n log n) in everything stored. The
// state-machine rule compares the Index under test with it, and tests of code built on an
// Index (a dispatcher, a runner) can use it as the Index whose answers they trust. It is
// not for production. It implements duework.MissingScheduler and duework.ClaimGuard too.
//
// It is safe for concurrent use, keeps every time exactly, and returns times in UTC
// without a monotonic clock reading.
type Model struct {
	mu     sync.Mutex
	rows   map[duework.Key]*modelRow
	users  map[string]*modelUser
	tokens uint64 // the last token handed out
}

type modelRow struct {
	e     duework.Entry
	token uint64 // the current claim's token; 0 when unclaimed
	until time.Time
}

type modelUser struct {
	group      string
	lastServed time.Time
	heldUntil  time.Time // zero when not held
}

var (
	_ duework.Index            = (*Model)(nil)
	_ duework.MissingScheduler = (*Model)(nil)
	_ duework.ClaimGuard       = (*Model)(nil)
)

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

// turns returns the Turn of every user with entries: max(ReadyAt, LastServed), ReadyAt
// the least visible-at instant of its entries.
func (m *Model) turns() map[string]time.Time {
	readyAt := map[string]time.Time{}
	for k, r := range m.rows {
		if v, ok := readyAt[k.UserID]; !ok || r.visibleAt().Before(v) {
			readyAt[k.UserID] = r.visibleAt()
		}
	}
	for id, t := range readyAt {
		if served := m.users[id].lastServed; served.After(t) {
			readyAt[id] = served
		}
	}
	return readyAt
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
	if err := duework.ValidateEntries(tc, entries); err != nil {
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
	if err := duework.ValidateWorkKey(workKey); err != nil {
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
	if err := duework.ValidateWorkKey(workKey); err != nil {
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
	if err := duework.ValidateCompletion(tc, c, next); err != nil {
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
		if err := duework.ValidateCompletion(d.Tenant, d.Claim, d.Next); err != nil {
			errs[i] = err
			continue
		}
		errs[i] = m.complete(d.Claim, d.Next)
	}
	return errs, nil
}

// CheckClaim returns nil while c is the current claim of tc's entry, else ErrClaimLost.
func (m *Model) CheckClaim(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	return m.whileClaimed(ctx, "CheckClaim", tc, c, func() {})
}

// UnscheduleClaimed removes tc's entry while c is its current claim, else ErrClaimLost.
func (m *Model) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	return m.whileClaimed(ctx, "UnscheduleClaimed", tc, c, func() { delete(m.rows, c.Entry.Key()) })
}

// whileClaimed runs write under the Model's lock if c is the current claim of tc's entry,
// and returns ErrClaimLost, naming op, if it is not.
func (m *Model) whileClaimed(ctx context.Context, op string, tc tenancy.Context, c duework.Claim, write func()) error {
	if err := duework.ValidateClaim(tc, c); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.current(c) == nil {
		return fmt.Errorf("indextest: Model.%s %q with token %d: %w", op, c.Entry.WorkKey, c.Token, duework.ErrClaimLost)
	}
	write()
	return nil
}

// DueBefore returns at most limit entries visible at now in (DueAt, UserID, WorkKey) order.
func (m *Model) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if err := duework.ValidateTime("now", now); err != nil {
		return nil, err
	}
	if err := duework.ValidateLimit("limit", limit); err != nil {
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
	visible := m.visibleOf(read, q.Now)
	for _, c := range cands {
		u := m.users[c.id]
		due := visible[c.id]
		h := duework.Head{UserID: c.id, LastServed: norm(u.lastServed), Turn: norm(c.turn), Due: due, More: len(due) > q.PerUser}
		if h.More {
			h.Due = due[:q.PerUser:q.PerUser]
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
	if err := duework.ValidateRoutes(routes); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	for _, r := range routes {
		if u := m.users[r.UserID]; u != nil {
			u.group = r.Group
		}
	}
	return nil
}

// Groups returns, sorted, the groups holding a user ready at now.
func (m *Model) Groups(ctx context.Context, now time.Time) ([]string, error) {
	if err := duework.ValidateTime("now", now); err != nil {
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
	if err := duework.ValidateTime("heldUntil", heldUntil); err != nil {
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

// Claim claims those of keys that are visible at now, until until.
func (m *Model) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if err := duework.ValidateClaimWindow(now, until); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []duework.Claim
	for _, k := range keys {
		r := m.rows[k]
		if r == nil || !r.visible(now) {
			continue
		}
		m.tokens++
		r.token, r.until = m.tokens, until
		u := m.users[k.UserID]
		if now.After(u.lastServed) {
			u.lastServed = now
		}
		u.heldUntil = time.Time{}
		out = append(out, duework.Claim{Entry: normEntry(r.e), Token: r.token, Until: norm(until)})
	}
	return out, nil
}
