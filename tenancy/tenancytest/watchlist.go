package tenancytest

import (
	"errors"
	"strings"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

var watchlistRules = []rule[*watchSubject]{
	{"AddGet", "Get returns the entry Add stored, every field, AddedAt to the microsecond", addGet},
	{"AddReplaces", "Add of a slug the tenant holds replaces its entry", replaces[*watchSubject]},
	{"GetAbsent", "Get of a slug the tenant does not hold is ErrNotFound", getAbsent[*watchSubject]},
	{"Remove", "Remove deletes the tenant's entry; removing a slug it does not hold is ErrNotFound", removes[*watchSubject]},
	{"ListOrder", "List returns the tenant's own entries ordered by slug in byte order, in a slice the caller owns", listOrder[*watchSubject]},
	{"CrossTenant", "another tenant's entry is out of reach: Get and Remove of it answer exactly as if it did not exist (ErrNotFound), Add of it is ErrForbidden, List omits it, and it does not change", crossTenant[*watchSubject]},
	{"SharedSlugs", "tenants that use one slug hold separate entries: one's Add and Remove never touch the other's", sharedIDs[*watchSubject]},
	{"Forbidden", "Add of an entry whose UserID is not the Context's is ErrForbidden, writes nothing, and is never rewritten to the caller's user", forbidden},
	{"NoTenant", noTenantRule, noTenant[*watchSubject]},
	{"DoneContext", doneContextRule, doneContext[*watchSubject]},
	{"BadIDs", "a bad slug is ErrInvalidID naming the slug and changes nothing; a slug of MaxIDLength bytes is accepted", badIDsRefused[*watchSubject]},
	{"BadTier", "Add of an entry whose Tier is not a valid ID is ErrInvalidID naming the tier and writes nothing", badTier},
	{"AddedAtRange", "Add of an AddedAt outside years 1 to 9999 UTC is ErrInvalidID naming AddedAt and writes nothing; the first and last microseconds of that range are stored", addedAtRange},
	{"Concurrent", "tenants calling at once each end with exactly their own entries", concurrent[*watchSubject]},
	{"GetMany", "GetMany answers each lookup as Get would under the lookup's own Context, in the order given — the entry, ErrNotFound with Get's text, ErrNoTenant for the zero Context, ErrInvalidID naming the slug — a lookup given twice twice, in slices the caller owns, and changes nothing", getManyOutcomes},
	{"GetManyCrossTenant", "in one GetMany, a lookup of another tenant's entry answers exactly as if it did not exist (Get's ErrNotFound) while that tenant's own lookups read it, and each tenant's entry under a shared slug is its own", getManyCrossTenant},
	{"GetManyDoneContext", "GetMany with a done ctx returns only an error wrapping ctx.Err(), whatever its lookups, and changes nothing", getManyDoneContext},
	{"AddMany", "AddMany stores every entry as Add would, replacing the tenant's entries under the same slugs and leaving its others and other tenants' alone; AddMany of no entries changes nothing", addManyStores},
	{"AddManyAllOrNothing", "AddMany of a batch holding an entry that Validate refuses, anywhere in it — a bad slug or tier, an AddedAt out of range, an entry naming another user — returns Validate's error (ErrInvalidID naming the field, or ErrForbidden) naming the entry's index, and writes none of the batch", addManyAllOrNothing},
	{"AddManyDuplicates", "AddMany of a slug given twice or more writes it once, with the entry given last for it", addManyDuplicates},
	{"AddAll", "AddAll stores each entry under its own UserID as AddMany would, many tenants in one call — replacing their entries under the same slugs, leaving their others alone, the last given of a (UserID, Slug) winning; AddAll of no entries changes nothing", addAllStores},
	{"AddAllAllOrNothing", "AddAll of a batch holding an entry that Validate refuses under its UserID's Context — an invalid UserID, a bad slug or tier, an AddedAt out of range — returns that error (ErrInvalidID naming the field) naming the entry's index, and writes none of the batch", addAllAllOrNothing},
	{"AddManyCrossTenant", "AddMany of entries naming another tenant, alone or among the caller's own, is ErrForbidden and changes neither tenant's entries; the caller's own batch under that tenant's slugs is the caller's alone", addManyCrossTenant},
	{"Tenants", "Tenants pages through the users holding entries in byte order: each page holds the first limit of them that sort after after, whether or not after is a user, with every ID exactly as it was given, in a slice the caller owns", tenantsPaging},
	{"TenantsBounds", "Tenants with a limit outside [1, MaxTenantsPage] or an after that is neither \"\" nor a valid ID is ErrInvalidID naming the limit or after; with a done ctx it returns an error wrapping ctx.Err(); neither changes anything", tenantsBounds},
	{"TenantsMembership", "Tenants lists exactly the users that hold at least one entry: a user appears with its first entry, by Add or AddMany, and disappears with its last; refused writes and reads add no one", tenantsMembership},
	{"StateMachine", keyedModelRule, keyedModel[*watchSubject]},
}

// sameEntry compares entries field by field, AddedAt with Equal.
func sameEntry(a, b tenancy.WatchlistEntry) bool {
	return a.UserID == b.UserID && a.Slug == b.Slug && a.Tier == b.Tier && a.AddedAt.Equal(b.AddedAt)
}

// wantEntry fails unless tc's entry e.Slug is e.
func (s *suite[S]) wantEntry(w tenancy.Watchlist, tc tenancy.Context, e tenancy.WatchlistEntry) {
	s.t.Helper()
	got, err := w.Get(bg, tc, e.Slug)
	if err != nil || !sameEntry(got, e) {
		s.errorf("Get(%s, %q) = %s, %v; want %s", tc.UserID(), e.Slug, showEntry(got), err, showEntry(e))
	}
}

func addGet(s *suite[*watchSubject]) {
	a := tenant(s.t, "alice")
	es := []tenancy.WatchlistEntry{
		{UserID: "alice", Slug: "feed-1", Tier: "hot", AddedAt: t0.Add(123456 * time.Microsecond)},
		{UserID: "alice", Slug: "feed-2", Tier: "cold"}, // a zero AddedAt
		{UserID: "alice", Slug: "feed 3", Tier: "digest_weekly", AddedAt: t0.In(time.FixedZone("east", 5*3600))},
		{UserID: "alice", Slug: "José/ünïcode", Tier: "my tier", AddedAt: t0.Add(-time.Microsecond)},
	}
	for _, e := range es {
		if err := s.x.w.Add(bg, a, e); err != nil {
			s.fatalf("Add(%s): %v", showEntry(e), err)
		}
	}
	for _, e := range es {
		s.wantEntry(s.x.w, a, e)
	}
	if got, err := s.x.w.Get(bg, a, "feed-2"); err == nil && !got.AddedAt.IsZero() {
		s.errorf("a zero AddedAt came back as %v", got.AddedAt)
	}
}

func forbidden(s *suite[*watchSubject]) {
	a, b := tenant(s.t, "alice"), tenant(s.t, "bob")
	if err := s.x.seed(bg, a); err != nil {
		s.fatalf("seeding alice: %v", err)
	}
	before := s.snapshot(a, b)
	for _, user := range []string{"alice", "", "Bob", "bob ", "bo", "bobby", "bob\u200b"} {
		e := tenancy.WatchlistEntry{UserID: user, Slug: "new", Tier: "hot", AddedAt: t0}
		if err := s.x.w.Add(bg, b, e); !errors.Is(err, tenancy.ErrForbidden) {
			s.errorf("bob's Add of an entry naming user %q = %v, want ErrForbidden", user, err)
		}
	}
	// Alice's own entry, as it is, is not bob's to write either.
	if err := s.x.w.Add(bg, b, tenancy.WatchlistEntry{UserID: "alice", Slug: aIDs[0], Tier: "cold", AddedAt: t0}); !errors.Is(err, tenancy.ErrForbidden) {
		s.errorf("bob's Add of alice's slug %q naming alice = %v, want ErrForbidden", aIDs[0], err)
	}
	s.unchanged("refused Adds", before, a, b)
}

func badTier(s *suite[*watchSubject]) {
	a, before := s.seeded()
	for _, tier := range []string{"", "hot\n", "hot ", " hot", "\u200bhot", "h\xffot", strings.Repeat("t", tenancy.MaxIDLength+1)} {
		err := s.x.w.Add(bg, a, tenancy.WatchlistEntry{UserID: "alice", Slug: "new", Tier: tier, AddedAt: t0})
		switch {
		case !errors.Is(err, tenancy.ErrInvalidID):
			s.errorf("Add with Tier %q = %v, want ErrInvalidID", tier, err)
		case !strings.Contains(err.Error(), "tier"):
			s.errorf("Add with Tier %q = %q, want the error to name the tier", tier, err)
		}
	}
	s.unchanged("Adds with bad tiers", before, a)
}

func addedAtRange(s *suite[*watchSubject]) {
	a, before := s.seeded()
	east, west := time.FixedZone("east", 5*3600), time.FixedZone("west", -5*3600)
	for _, at := range []time.Time{
		time.Date(0, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 3, 0, 0, 0, east),       // year 0 in UTC
		time.Date(9999, 12, 31, 22, 0, 0, 0, west), // year 10000 in UTC
		time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-4713, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(1<<62, 0),
	} {
		err := s.x.w.Add(bg, a, tenancy.WatchlistEntry{UserID: "alice", Slug: "new", Tier: "hot", AddedAt: at})
		switch {
		case !errors.Is(err, tenancy.ErrInvalidID):
			s.errorf("Add with AddedAt %v = %v, want ErrInvalidID", at, err)
		case !strings.Contains(err.Error(), "AddedAt"):
			s.errorf("Add with AddedAt %v = %q, want the error to name AddedAt", at, err)
		}
	}
	s.unchanged("Adds with AddedAt out of range", before, a)
	for i, at := range []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(9999, 12, 31, 18, 0, 0, 0, west),
		time.Date(1, 1, 1, 5, 0, 0, 0, east),
	} {
		e := tenancy.WatchlistEntry{UserID: "alice", Slug: "edge" + string(rune('a'+i)), Tier: "hot", AddedAt: at}
		if err := s.x.w.Add(bg, a, e); err != nil {
			s.errorf("Add with AddedAt %v = %v, want it stored", at, err)
			continue
		}
		s.wantEntry(s.x.w, a, e)
	}
}
