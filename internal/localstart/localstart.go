// Package localstart carries, from an Index's Claim to its StartClaims and Unclaim, the
// claims that the process which made them will start itself, so that an Index can start
// them in the claim's own write and answer their first StartClaims without a round trip.
//
// The bridge's Runner claims the items it runs in its own process: none of them is sent
// to a broker, and no other process learns their tokens. It makes one Set per Worker,
// claims under a context carrying it (With), and passes that context to every
// StartClaims, Unclaim and CompleteMany of its items. An Index that takes part (the
// postgres and DynamoDB Indexes) does four things with the Set it finds on a context
// (From):
//
//   - Claim writes its claims started, so that no other process can start them, and Adds
//     them once its write has committed;
//   - StartClaims starts a claim it Takes from the Set while the claim is live, without
//     asking its store: the claim is current, since no other process may claim an entry
//     before its claim ends, and it is started once, since Take hands it out once. A claim
//     it Takes once it has ended is started by the store, if it is still current,
//     whatever its mark says;
//   - Unclaim hands back a claim it Takes from the Set though its mark says started: it was
//     never started;
//   - Complete, CompleteMany and UnscheduleClaimed Take the claims they end, so that no
//     later StartClaims of one under the Set is answered without asking the store.
//
// Every other StartClaims and Unclaim of such a claim — without the Set, or after Take
// handed it out — finds it started. So the rule the Index keeps does not change: a claim
// is started at most once, by the first of the holder's StartClaims, in any process; what
// changes is that only the process holding the Set can start it. The claim counts as
// started from its Claim, so the host's Schedule or Unschedule of its entry meanwhile ends
// it as it ends a running item's, and the holder's start still succeeds: the item's
// completion finds the claim lost, as a running one's would. A claim whose process dies
// with it is left to end by time, as every claim is.
//
// An Index that does not take part ignores the Set: it never Adds, so Take never hands
// anything out, and its StartClaims and Unclaim work as the contract says. A wrapper of
// an Index that takes part must pass each call's context on, as every wrapper must.
package localstart

import (
	"context"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
)

// Set holds the claims made under it that are neither started nor handed back yet, each
// with the instant it ends on the Set's clock. Its methods are safe for concurrent use.
// The zero value is not usable: use New.
type Set struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[key]time.Time
	// swept is the Set's size after the last sweep of ended claims, and sweptAt the
	// Set's clock then: Add sweeps again once the Set has doubled since, dropping the
	// claims that had ended by sweptAt, so that a Set costs O(1) per claim, and a claim is
	// kept a while after it ends (its holder may still hand it back).
	swept   int
	sweptAt time.Time
}

// key is a claim as a map key: its entry's key, its token, and its Until in Unix seconds
// and nanoseconds, so that two Untils of one instant in different locations are one key.
type key struct {
	user, work string
	token      uint64
	sec        int64
	nsec       int32
}

func keyOf(c duework.Claim) key {
	return key{user: c.Entry.UserID, work: c.Entry.WorkKey, token: c.Token, sec: c.Until.Unix(), nsec: int32(c.Until.Nanosecond())}
}

// minSweep is the least size at which Add sweeps the Set.
const minSweep = 1024

// New returns an empty Set whose clock is now. A claim Added at the Claim's now is live
// for Until − now on that clock, so the Claim's time line and the clock need not agree,
// as a Runner's Cycle at a given now and its Worker's clock need not.
func New(now func() time.Time) *Set {
	return &Set{now: now, m: make(map[key]time.Time)}
}

type ctxKey struct{}

// With returns a context carrying s.
func With(ctx context.Context, s *Set) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// From returns the Set ctx carries, or nil.
func From(ctx context.Context) *Set {
	s, _ := ctx.Value(ctxKey{}).(*Set)
	return s
}

// Add puts claims, made at now on the Claim's time line, in s, each until Taken. From
// time to time it drops the claims that had ended by its previous sweep: those a holder
// left behind. A nil Set adds nothing.
func (s *Set) Add(now time.Time, claims []duework.Claim) {
	if s == nil || len(claims) == 0 {
		return
	}
	at := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range claims {
		s.m[keyOf(c)] = at.Add(c.Until.Sub(now))
	}
	if len(s.m) >= max(minSweep, 2*s.swept) {
		for k, end := range s.m {
			if !end.After(s.sweptAt) {
				delete(s.m, k)
			}
		}
		s.swept, s.sweptAt = len(s.m), at
	}
}

// Take removes c from s and reports whether it was there (mine) and, if so, whether it
// is live: s's clock reads a time before the claim's end. Of several Takes of one claim,
// one at most finds it mine. A nil Set holds nothing.
func (s *Set) Take(c duework.Claim) (mine, live bool) {
	if s == nil {
		return false, false
	}
	k := keyOf(c)
	s.mu.Lock()
	end, mine := s.m[k]
	delete(s.m, k)
	s.mu.Unlock()
	return mine, mine && s.now().Before(end)
}

// Return puts back claims that were Taken for a call that then failed as a whole, so that
// a retry of the call still finds them its own. They come back as ended: the retry asks
// the store whether each is still current. A nil Set takes nothing back.
func (s *Set) Return(claims []duework.Claim) {
	if s == nil || len(claims) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range claims {
		s.m[keyOf(c)] = time.Time{}
	}
}

// Len returns how many claims s holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
