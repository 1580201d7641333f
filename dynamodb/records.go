package rotadynamo

import (
	"time"

	"github.com/rotaworks/rota/duework"
)

// The attributes of a user item (partition userPK(user), sort key skUser).
const (
	attrGroup       = "grp" // its group; absent for the unrouted group ""
	attrWeight      = "w"   // its limits, each absent when zero
	attrMaxInFlight = "mif" //
	attrEvery       = "ev"  // nanoseconds
	attrBurst       = "bu"  //
	attrServed      = "ls"  // LastServed
	attrPass        = "pa"  // the stride position
	attrMark        = "rm"  // the rate mark
	attrHeld        = "hu"  // the end of the hold a Ready took
	attrVersion     = "v"   // raised by every write of its entries, limits or pause
	attrTokens      = "tk"  // the last claim token handed out for its entries
	attrEntries     = "ne"  // how many entries it has
	attrClaims      = "nc"  // how many of them are claimed (ended claims included)
	attrFreeAt      = "fa"  // the earliest DueAt of its unclaimed entries
	attrClaimEnd    = "ce"  // the earliest Until of its claims
	attrSlot        = "sl"  // with MaxInFlight M, the M-th latest Until of its claims
	attrFirstDue    = "fd"  // the earliest DueAt of its entries
	attrPausedUntil = "pu"  // the end of its pause
	attrPauseReason = "pr"  //
)

// The attributes of an entry item (partition userPK(user), sort key entrySK(work key)).
const (
	attrTier        = "tr" // absent when ""
	attrDueAt       = "du"
	attrLastRunAt   = "lr"  // absent when zero
	attrMissStreak  = "ms"  // absent when zero
	attrErrorStreak = "es"  // absent when zero
	attrToken       = "tok" // the current claim's token; absent when unclaimed
	attrUntil       = "cu"  // the current claim's Until; absent when unclaimed
	attrStarted     = "st"  // the current claim was started; absent otherwise
)

// userRec is a user item as the Index reads and writes it.
type userRec struct {
	id     string
	stored bool // the item exists
	ver    int64

	group       string
	limits      duework.Limits
	lastServed  time.Time
	pass        time.Time
	mark        time.Time
	held        time.Time
	pausedUntil time.Time
	pauseReason string
	tokens      uint64

	// Derived from its entries, kept exact by every write of them (zero times: none).
	entries, claims int
	freeAt          time.Time
	claimEnd        time.Time
	slot            time.Time
	firstDue        time.Time
}

// readUserRec decodes a user item; m nil is a user the index does not store.
func readUserRec(id string, m map[string]av) (*userRec, error) {
	u := &userRec{id: id}
	if m == nil {
		return u, nil
	}
	it := &item{m: m}
	u.stored = true
	u.ver = it.int(attrVersion)
	u.group = it.str(attrGroup)
	u.limits = duework.Limits{
		Weight: int(it.int(attrWeight)), MaxInFlight: int(it.int(attrMaxInFlight)),
		Every: time.Duration(it.int(attrEvery)), Burst: int(it.int(attrBurst)),
	}
	u.lastServed, u.pass, u.mark = it.time(attrServed), it.time(attrPass), it.time(attrMark)
	u.held = it.time(attrHeld)
	u.pausedUntil, u.pauseReason = it.time(attrPausedUntil), it.str(attrPauseReason)
	u.tokens = it.uint(attrTokens)
	u.entries, u.claims = int(it.int(attrEntries)), int(it.int(attrClaims))
	u.freeAt, u.claimEnd, u.slot = it.time(attrFreeAt), it.time(attrClaimEnd), it.time(attrSlot)
	u.firstDue = it.time(attrFirstDue)
	return u, it.err
}

// readyAt is the user's ReadyAt (see duework.Index), with its pause folded in while the
// pause counts; the zero time for a user without entries.
func (u *userRec) readyAt() time.Time {
	if u.entries == 0 {
		return time.Time{}
	}
	at := earlier(u.freeAt, u.claimEnd)
	if u.limits.MaxInFlight > 0 {
		at = later(at, u.slot)
	}
	at = later(at, rateInstant(u.limits, u.mark))
	if u.pauseCounts() {
		at = later(at, u.pausedUntil)
	}
	return at
}

// turn is the user's Turn: max(ReadyAt, pass); zero without entries.
func (u *userRec) turn() time.Time {
	if u.entries == 0 {
		return time.Time{}
	}
	return later(u.readyAt(), u.pass)
}

// pauseCounts reports whether the user's stored pause counts: it ends after the user was
// last served. A pause stops counting once the user is served at or after its end.
func (u *userRec) pauseCounts() bool { return u.pausedUntil.After(u.lastServed) }

// paused reports whether the user is paused at now: its pause counts and ends after now.
func (u *userRec) paused(now time.Time) bool { return u.pauseCounts() && u.pausedUntil.After(now) }

// write returns the update that stores u, as the version read (u.ver) and raises it:
// every attribute the Index derives, its queue, due-time and paused index keys, for a user
// of bucket b. It leaves the hold alone. The caller adds to it (Claim ends the hold).
func (u *userRec) write(b int) *update {
	up := newUpdate(key(userPK(u.id), skUser))
	if u.stored {
		ver := u.ver
		up.cond(func(e *expr) string { return e.n(attrVersion) + " = " + e.v(nv(ver)) })
	} else {
		up.cond(func(e *expr) string { return "attribute_not_exists(" + e.n(attrPK) + ")" })
	}
	up.set(attrVersion, nv(u.ver+1))
	up.setOrRemove(attrGroup, optS(u.group))
	up.setOrRemove(attrWeight, optN(int64(u.limits.Weight)))
	up.setOrRemove(attrMaxInFlight, optN(int64(u.limits.MaxInFlight)))
	up.setOrRemove(attrEvery, optN(int64(u.limits.Every)))
	up.setOrRemove(attrBurst, optN(int64(u.limits.Burst)))
	for _, f := range []struct {
		a string
		t time.Time
	}{{attrServed, u.lastServed}, {attrPass, u.pass}, {attrMark, u.mark}, {attrPausedUntil, u.pausedUntil},
		{attrFreeAt, u.freeAt}, {attrClaimEnd, u.claimEnd}, {attrSlot, u.slot}, {attrFirstDue, u.firstDue}} {
		up.setOrRemove(f.a, optT(f.t))
	}
	up.setOrRemove(attrPauseReason, optS(u.pauseReason))
	up.setOrRemove(attrTokens, optU(u.tokens))
	up.setOrRemove(attrEntries, optN(int64(u.entries)))
	up.setOrRemove(attrClaims, optN(int64(u.claims)))
	u.indexKeys(up, b)
	return up
}

// indexKeys sets or removes the user item's keys of the queue, due-time and paused
// indexes.
func (u *userRec) indexKeys(up *update, b int) {
	if u.entries > 0 {
		up.set(attrQueueKey, sv(queueKey(u.group, b))).set(attrQueueSK, sv(timeKey(u.turn(), u.id)))
		up.set(attrDueKey, sv(dueKey(b))).set(attrDueSK, sv(timeKey(u.firstDue, u.id)))
	} else {
		up.remove(attrQueueKey).remove(attrQueueSK).remove(attrDueKey).remove(attrDueSK)
	}
	if !u.pausedUntil.IsZero() {
		up.set(attrPausedKey, sv(pausedKey(b))).set(attrPausedSK, sv(u.id))
	} else {
		up.remove(attrPausedKey).remove(attrPausedSK)
	}
}

// queueSK is the user's sort key in its queue as write stores it.
func (u *userRec) queueSK() string { return timeKey(u.turn(), u.id) }

func optS(s string) av {
	if s == "" {
		return nil
	}
	return sv(s)
}

func optN(n int64) av {
	if n == 0 {
		return nil
	}
	return nv(n)
}

func optU(n uint64) av {
	if n == 0 {
		return nil
	}
	return uv(n)
}

func optT(t time.Time) av {
	if t.IsZero() {
		return nil
	}
	return tv(t)
}

// entryRec is an entry item as the Index reads and writes it.
type entryRec struct {
	e       duework.Entry
	token   uint64    // the current claim's token; 0 when unclaimed
	until   time.Time // the current claim's Until; zero when unclaimed
	started bool
}

func (r *entryRec) claimed() bool { return r.token != 0 }

// visible reports whether the entry is visible at now: due, and unclaimed or its claim
// ended.
func (r *entryRec) visible(now time.Time) bool {
	return !r.e.DueAt.After(now) && (!r.claimed() || !r.until.After(now))
}

// readEntryRec decodes an entry item of user.
func readEntryRec(m map[string]av) (*entryRec, error) {
	it := &item{m: m}
	r := &entryRec{e: duework.Entry{
		UserID: userOf(it.str(attrPK)), WorkKey: it.str(attrSK)[len(entryPrefix):], Tier: it.str(attrTier),
		DueAt: it.time(attrDueAt), LastRunAt: it.time(attrLastRunAt), MissStreak: int(it.int(attrMissStreak)),
		ErrorStreak: int(it.int(attrErrorStreak)),
	}}
	r.token, r.until, r.started = it.uint(attrToken), it.time(attrUntil), it.bool(attrStarted)
	return r, it.err
}

// item returns the whole entry item.
func (r *entryRec) item() map[string]av {
	m := key(userPK(r.e.UserID), entrySK(r.e.WorkKey))
	m[attrDueAt] = tv(r.e.DueAt)
	m[attrLDue] = sv(timeKey(r.e.DueAt, r.e.WorkKey))
	if r.e.Tier != "" {
		m[attrTier] = sv(r.e.Tier)
	}
	if !r.e.LastRunAt.IsZero() {
		m[attrLastRunAt] = tv(r.e.LastRunAt)
	}
	if r.e.MissStreak != 0 {
		m[attrMissStreak] = nv(int64(r.e.MissStreak))
	}
	if r.e.ErrorStreak != 0 {
		m[attrErrorStreak] = nv(int64(r.e.ErrorStreak))
	}
	if r.claimed() {
		m[attrToken], m[attrUntil] = uv(r.token), tv(r.until)
		m[attrLClaim] = sv(timeKey(r.until, r.e.WorkKey))
	}
	return m
}

// norm is how the Index returns a time: UTC, no monotonic clock reading.
func norm(t time.Time) time.Time { return t.Round(0).UTC() }

func normEntry(e duework.Entry) duework.Entry {
	e.DueAt, e.LastRunAt = norm(e.DueAt), norm(e.LastRunAt)
	return e
}
