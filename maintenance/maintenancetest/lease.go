package maintenancetest

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

var leaseRules = []rule{
	{"FreeLease", "a lease never granted has no current grant", freeLease},
	{"AcquireGrants", "Acquire grants holder a positive token from now until at most now+ttl, and Current returns it", acquireGrants},
	{"HeldRefusesAll", "a live grant refuses every Acquire, its holder's included, with ErrLeaseHeld, and changes nothing", heldRefusesAll},
	{"OneConcurrentWinner", "exactly one of many concurrent acquirers wins; the others get ErrLeaseHeld", oneConcurrentWinner},
	{"TokensGrow", "each grant's token is greater than every earlier grant's", tokensGrow},
	{"LapseAtExpiry", "a grant lapses at its ExpiresAt and another holder acquires", lapseAtExpiry},
	{"RenewExtends", "Renew extends a live grant to at most now+ttl and keeps its Holder, Token and AcquiredAt", renewExtends},
	{"MaxHold", "Renew once now − AcquiredAt ≥ MaxHold is ErrHoldExceeded, and another holder acquires within one TTL of the last renewal", maxHold},
	{"StaleGrant", "a replaced grant can neither renew nor release (ErrNotHolder), and changes nothing", staleGrant},
	{"RenewExpired", "Renew of an expired grant is ErrNotHolder", renewExpired},
	{"Release", "Release frees the lease; releasing or renewing a released grant is ErrNotHolder", release},
	{"BadInput", "an empty holder or a ttl ≤ 0 is ErrInvalid and changes nothing", leaseBadInput},
	{"BadHolder", "a holder that is not a valid name — longer than 256 bytes, not valid UTF-8, with a control or format character, or with white space at either end — is ErrInvalid and changes nothing", badHolder},
	{"TimeRange", "a now or an expiry outside years 1 through 9999 UTC is ErrInvalid and changes nothing; times at the edges of the range are held", leaseTimeRange},
}

var bg = context.Background()

func (s *suite) acquire(l maintenance.Lease, holder string, now time.Time) maintenance.Grant {
	s.t.Helper()
	g, err := l.Acquire(bg, holder, leaseTTL, now)
	if err != nil {
		s.fatalf("Acquire(%q, %v, %v): %v", holder, leaseTTL, now, err)
	}
	return g
}

// wantFree fails unless l is free at now.
func (s *suite) wantFree(l maintenance.Lease, now time.Time) {
	s.t.Helper()
	if g, ok, err := l.Current(bg, now); err != nil || ok {
		s.fatalf("Current(%v) = %+v, %v, %v; want a free lease", now, g, ok, err)
	}
}

// wantHeld fails unless l's live grant at now is g.
func (s *suite) wantHeld(l maintenance.Lease, now time.Time, g maintenance.Grant) {
	s.t.Helper()
	cur, ok, err := l.Current(bg, now)
	if err != nil || !ok || cur.Token != g.Token || cur.Holder != g.Holder || !cur.ExpiresAt.Equal(g.ExpiresAt) {
		s.fatalf("Current(%v) = %+v, %v, %v; want %+v", now, cur, ok, err, g)
	}
}

func freeLease(s *suite) { s.wantFree(s.freshL(), base) }

func acquireGrants(s *suite) {
	l := s.freshL()
	g := s.acquire(l, "a", base)
	if g.Holder != "a" || g.Token == 0 || g.Token > math.MaxInt64 || !g.AcquiredAt.Equal(base) ||
		!g.ExpiresAt.After(base) || g.ExpiresAt.After(base.Add(leaseTTL)) {
		s.fatalf("got %+v", g)
	}
	s.wantHeld(l, base.Add(time.Minute), g)
}

func heldRefusesAll(s *suite) {
	l := s.freshL()
	g := s.acquire(l, "a", base)
	for _, h := range []string{"b", "a"} {
		if _, err := l.Acquire(bg, h, leaseTTL, base.Add(time.Minute)); !errors.Is(err, maintenance.ErrLeaseHeld) {
			s.errorf("Acquire by %q while a grant is live = %v, want ErrLeaseHeld", h, err)
		}
	}
	s.wantHeld(l, base.Add(time.Minute), g)
}

func oneConcurrentWinner(s *suite) {
	l := s.freshL()
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	grants := make([]maintenance.Grant, n)
	for i := range n {
		wg.Go(func() { grants[i], errs[i] = l.Acquire(bg, string(rune('a'+i)), leaseTTL, base) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			s.fatalf("%q and %q both won", grants[won].Holder, grants[i].Holder)
		case err == nil:
			won = i
		case !errors.Is(err, maintenance.ErrLeaseHeld):
			s.fatalf("a losing acquirer got %v", err)
		}
	}
	if won < 0 {
		s.fatalf("none won")
	}
	s.wantHeld(l, base, grants[won])
}

func tokensGrow(s *suite) {
	l := s.freshL()
	now := base
	var last uint64
	for i := range 6 {
		g := s.acquire(l, string(rune('a'+i%2)), now)
		if g.Token <= last {
			s.fatalf("grant %d has token %d after %d", i, g.Token, last)
		}
		last = g.Token
		if i%2 == 0 {
			if err := l.Release(bg, g); err != nil {
				s.fatalf("Release: %v", err)
			}
		} else {
			now = g.ExpiresAt // let it lapse
		}
		now = now.Add(time.Second)
	}
}

func lapseAtExpiry(s *suite) {
	l := s.freshL()
	g := s.acquire(l, "a", base)
	s.wantHeld(l, g.ExpiresAt.Add(-time.Microsecond), g)
	s.wantFree(l, g.ExpiresAt)
	if g2 := s.acquire(l, "b", g.ExpiresAt); g2.Token <= g.Token {
		s.fatalf("token %d after %d", g2.Token, g.Token)
	}
}

func renewExtends(s *suite) {
	l := s.freshL()
	g := s.acquire(l, "a", base)
	at := base.Add(leaseTTL / 2)
	r, err := l.Renew(bg, g, leaseTTL, at)
	if err != nil {
		s.fatalf("Renew of a live grant before MaxHold: %v", err)
	}
	if r.Token != g.Token || !r.AcquiredAt.Equal(g.AcquiredAt) || r.Holder != g.Holder ||
		!r.ExpiresAt.After(g.ExpiresAt) || r.ExpiresAt.After(at.Add(leaseTTL)) {
		s.fatalf("Renew = %+v from %+v", r, g)
	}
	s.wantHeld(l, g.ExpiresAt, r)
}

func maxHold(s *suite) {
	l := s.freshL()
	g := s.acquire(l, "a", base)
	step := leaseTTL / 2
	lastRenew := base
	for at := base.Add(step); at.Sub(base) < leaseMaxHold; at = at.Add(step) {
		r, err := l.Renew(bg, g, leaseTTL, at)
		if err != nil {
			s.fatalf("Renew at +%v, before MaxHold: %v", at.Sub(base), err)
		}
		if r.ExpiresAt.After(at.Add(leaseTTL)) {
			s.fatalf("Renew at +%v expires at %v, after now+ttl", at.Sub(base), r.ExpiresAt)
		}
		g, lastRenew = r, at
	}
	if _, err := l.Renew(bg, g, leaseTTL, base.Add(leaseMaxHold)); !errors.Is(err, maintenance.ErrHoldExceeded) {
		s.fatalf("Renew at MaxHold = %v, want ErrHoldExceeded", err)
	}
	deadline := lastRenew.Add(leaseTTL)
	g2, err := l.Acquire(bg, "b", leaseTTL, deadline)
	if err != nil {
		s.fatalf("another holder at %v, one TTL after the last renewal: %v", deadline, err)
	}
	if g2.Token <= g.Token {
		s.fatalf("token %d after %d", g2.Token, g.Token)
	}
}

func staleGrant(s *suite) {
	l := s.freshL()
	old := s.acquire(l, "a", base)
	cur := s.acquire(l, "b", old.ExpiresAt)
	at := old.ExpiresAt.Add(time.Minute)
	if _, err := l.Renew(bg, old, leaseTTL, at); !errors.Is(err, maintenance.ErrNotHolder) {
		s.errorf("Renew of a replaced grant = %v, want ErrNotHolder", err)
	}
	if err := l.Release(bg, old); !errors.Is(err, maintenance.ErrNotHolder) {
		s.errorf("Release of a replaced grant = %v, want ErrNotHolder", err)
	}
	s.wantHeld(l, at, cur)
}

func renewExpired(s *suite) {
	l := s.freshL()
	g := s.acquire(l, "a", base)
	if _, err := l.Renew(bg, g, leaseTTL, g.ExpiresAt); !errors.Is(err, maintenance.ErrNotHolder) {
		s.fatalf("Renew at ExpiresAt (before MaxHold) = %v, want ErrNotHolder", err)
	}
}

func release(s *suite) {
	l := s.freshL()
	g := s.acquire(l, "a", base)
	if err := l.Release(bg, g); err != nil {
		s.fatalf("Release of the live grant: %v", err)
	}
	s.wantFree(l, base)
	if err := l.Release(bg, g); !errors.Is(err, maintenance.ErrNotHolder) {
		s.errorf("a second Release = %v, want ErrNotHolder", err)
	}
	if _, err := l.Renew(bg, g, leaseTTL, base); !errors.Is(err, maintenance.ErrNotHolder) {
		s.errorf("Renew of a released grant = %v, want ErrNotHolder", err)
	}
	if g2 := s.acquire(l, "b", base); g2.Token <= g.Token {
		s.fatalf("token %d after %d", g2.Token, g.Token)
	}
}

// wantRefused fails unless err wraps ErrInvalid.
func (s *suite) wantRefused(call string, err error) {
	s.t.Helper()
	if !errors.Is(err, maintenance.ErrInvalid) {
		s.errorf("%s = %v, want ErrInvalid", call, err)
	}
}

func leaseBadInput(s *suite) {
	l := s.freshL()
	_, err := l.Acquire(bg, "", leaseTTL, base)
	s.wantRefused("Acquire with an empty holder", err)
	for _, bad := range []time.Duration{0, -time.Second} {
		_, err := l.Acquire(bg, "a", bad, base)
		s.wantRefused("Acquire with ttl "+bad.String(), err)
	}
	s.wantFree(l, base)
	g := s.acquire(l, "a", base)
	_, err = l.Renew(bg, g, 0, base)
	s.wantRefused("Renew with ttl 0", err)
	s.wantHeld(l, base, g)
}

// badNames are holders every store refuses.
var badNames = map[string]string{
	"overlong":               strings.Repeat("h", vocab.MaxNameLength+1),
	"a megabyte long":        strings.Repeat("h", 1<<20),
	"invalid UTF-8":          "daemon-\xff",
	"NUL":                    "daemon\x00a",
	"newline":                "daemon\na",
	"zero-width space":       "daemon\u200ba",
	"trailing white space":   "daemon ",
	"leading no-break space": "\u00a0daemon",
}

func badHolder(s *suite) {
	l := s.freshL()
	for what, h := range badNames {
		_, err := l.Acquire(bg, h, leaseTTL, base)
		s.wantRefused("Acquire with a holder "+what, err)
	}
	s.wantFree(l, base)
	longest := strings.Repeat("h", vocab.MaxNameLength)
	g := s.acquire(l, longest, base)
	if g.Holder != longest {
		s.fatalf("a holder of 256 bytes comes back as %d bytes", len(g.Holder))
	}
	g.Holder = badNames["NUL"]
	_, err := l.Renew(bg, g, leaseTTL, base)
	s.wantRefused("Renew with a bad holder", err)
}

// badTimes are instants outside years 1 through 9999 UTC.
var badTimes = map[string]time.Time{
	"year 10000":          time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	"time.Unix(MaxInt64)": time.Unix(math.MaxInt64, 0),
	"year 586577":         time.Date(586577, 1, 1, 0, 0, 0, 0, time.UTC),
	"year 0":              time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC),
	"year -5000":          time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC),
	"year 1 at UTC+0:01":  time.Date(1, 1, 1, 0, 0, 0, 0, time.FixedZone("west", 60)),
}

// The edges of the range: the last microsecond of 9999 and the first instants of year 1.
var (
	lastMicro  = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	firstMicro = time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)
)

func leaseTimeRange(s *suite) {
	l := s.freshL()
	for what, at := range badTimes {
		_, err := l.Acquire(bg, "a", leaseTTL, at)
		s.wantRefused("Acquire at "+what, err)
		_, _, err = l.Current(bg, at)
		s.wantRefused("Current at "+what, err)
	}
	late := lastMicro.Add(-leaseTTL / 2) // now+ttl passes the end of 9999
	_, err := l.Acquire(bg, "a", leaseTTL, late)
	s.wantRefused("Acquire whose expiry passes year 9999", err)
	s.wantFree(l, base)

	g := s.acquire(l, "a", firstMicro)
	s.wantHeld(l, firstMicro, g)
	if !g.AcquiredAt.Equal(firstMicro) {
		s.fatalf("a grant acquired at %v comes back acquired at %v", firstMicro, g.AcquiredAt)
	}
	at := lastMicro.Add(-leaseTTL)
	g = s.acquire(l, "b", at)
	s.wantHeld(l, at, g)
	_, err = l.Renew(bg, g, leaseTTL, at.Add(time.Minute))
	s.wantRefused("Renew whose expiry passes year 9999", err)
	s.wantHeld(l, at, g)
	for what, bad := range badTimes {
		_, err := l.Renew(bg, g, leaseTTL, bad)
		s.wantRefused("Renew at "+what, err)
	}
	s.wantHeld(l, at, g)
}
