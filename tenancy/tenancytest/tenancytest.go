package tenancytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/tenancy"
)

// RunWatchlist checks that the Watchlists newWatchlist returns keep the tenancy.Watchlist
// contract. newWatchlist must return a fresh, empty Watchlist on every call.
func RunWatchlist(t *testing.T, newWatchlist func(t *testing.T) tenancy.Watchlist) {
	t.Helper()
	run(t, watchlistRules, func(t *testing.T) *watchSubject {
		w := newWatchlist(t)
		if w == nil {
			t.Fatal("tenancytest: newWatchlist returned nil")
		}
		return &watchSubject{w: w}
	})
}

// RunRepository checks that the Repositories newRepository returns keep the
// tenancy.Repository contract; the values it stores are strings of its own making.
// newRepository must return a fresh, empty Repository on every call.
func RunRepository(t *testing.T, newRepository func(t *testing.T) tenancy.Repository[string]) {
	t.Helper()
	run(t, repositoryRules, func(t *testing.T) *repoSubject {
		r := newRepository(t)
		if r == nil {
			t.Fatal("tenancytest: newRepository returned nil")
		}
		return &repoSubject{r: r}
	})
}

// SettableEntitlements is what RunEntitlements checks: Entitlements whose plans can be set,
// as those of tenancy.MemoryEntitlements and of the postgres module can.
type SettableEntitlements interface {
	tenancy.Entitlements
	// SetPlan puts the tenant on plan p. It returns tenancy.ErrNoTenant for the zero
	// Context and tenancy.ErrInvalidPlan for a plan that is not Valid, changing nothing.
	SetPlan(ctx context.Context, tc tenancy.Context, p tenancy.PlanID) error
	// SetPlans puts each tenant of plans, by user ID, on its plan, all or nothing: an
	// invalid user ID (tenancy.ErrInvalidID) or plan (tenancy.ErrInvalidPlan) refuses the
	// call, naming the tenant, and changes nothing.
	SetPlans(ctx context.Context, plans map[string]tenancy.PlanID) error
}

// RunEntitlements checks that the Entitlements newEntitlements returns keep the
// tenancy.Entitlements contract and refuse what SetPlan must refuse. newEntitlements must
// return a fresh Entitlements, with every tenant on the default plan, on every call.
func RunEntitlements(t *testing.T, newEntitlements func(t *testing.T) SettableEntitlements) {
	t.Helper()
	run(t, entitlementsRules, func(t *testing.T) *entSubject {
		e := newEntitlements(t)
		if e == nil {
			t.Fatal("tenancytest: newEntitlements returned nil")
		}
		return &entSubject{e: e}
	})
}

// Rules lists the rules the Run functions check, one line per subtest: the interface and
// the subtest's name ("Watchlist/CrossTenant"), a colon, and the rule its failures cite.
func Rules() []string {
	var out []string
	out = appendRules(out, "Watchlist", watchlistRules)
	out = appendRules(out, "Repository", repositoryRules)
	return appendRules(out, "Entitlements", entitlementsRules)
}

func appendRules[S subject](out []string, iface string, rules []rule[S]) []string {
	for _, r := range rules {
		out = append(out, iface+"/"+r.name+": "+r.text)
	}
	return out
}

// rule is one subtest: a named rule of a contract and its check.
type rule[S subject] struct {
	name  string
	text  string
	check func(s *suite[S])
}

// suite is one rule's test: the implementation under test, wrapped in a subject, and the
// rule that failures cite.
type suite[S subject] struct {
	t    rapid.TB
	x    S
	rule string
	// fresh returns another fresh implementation, for rules that need several.
	fresh func() S
}

func run[S subject](t *testing.T, rules []rule[S], newSubject func(t *testing.T) S) {
	t.Helper()
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			fresh := func() S { return newSubject(t) }
			r.check(&suite[S]{t: t, x: fresh(), rule: r.text, fresh: fresh})
		})
	}
}

func (s *suite[S]) errorf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("rule %q broken: %s", s.rule, fmt.Sprintf(format, args...))
}

func (s *suite[S]) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("rule %q broken: %s", s.rule, fmt.Sprintf(format, args...))
}

// failer is what the helpers need of testing.T and rapid.T.
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

var bg = context.Background()

// t0 is the suite's fixed instant; every time is t0 plus an offset, to the microsecond.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// tenant returns the Context for user.
func tenant(t failer, user string) tenancy.Context {
	t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		t.Fatalf("tenancytest: tenancy.NewContext(%q): %v", user, err)
	}
	return tc
}

// tenantPairs are (A, B) pairs of tenants whose IDs would meet in a store that joined user
// and row IDs into one key, compared them loosely, or matched them with LIKE.
var tenantPairs = []pair{
	{"alice", "bob"},
	{"a", "a/b"}, // A's row "b/c" and B's row "c" under a "/" join
	{"a/b", "a"},
	{"alice", "Alice"},              // case
	{"jos\u00e9", "jose\u0301"},     // composed and decomposed: two IDs, not normalised
	{"ten", "tenant"},               // prefix
	{"a_c", "abc"},                  // LIKE's one-character wildcard
	{"acme corp", "acme\u00a0corp"}, // inner space and no-break space
}

type pair struct{ a, b string }

func (p pair) String() string { return fmt.Sprintf("A %q, B %q", p.a, p.b) }

// aIDs are tenant A's row IDs in the cross-tenant rules; B would reach some under a joined
// key.
var aIDs = []string{"b/c", "c", "shared", "ant"}

// badIDs are refused wherever an ID is taken, each for the reason named.
var badIDs = []struct{ reason, id string }{
	{"empty", ""},
	{"NUL", "a\x00b"},
	{"newline", "a\nb"},
	{"leading tab", "\tab"},
	{"DEL", "ab\x7f"},
	{"C1 control (NEL)", "a\u0085b"},
	{"escape", "\x1b[31mred"},
	{"invalid UTF-8", "a\xffb"},
	{"over MaxIDLength", strings.Repeat("x", tenancy.MaxIDLength+1)},
	{"over MaxIDLength in bytes", strings.Repeat("é", tenancy.MaxIDLength/2) + "x"},
	{"trailing space", "acme corp "},
	{"leading space", " acme"},
	{"only a space", " "},
	{"trailing no-break space", "acme\u00a0"},
	{"leading ideographic space", "\u3000acme"},
	{"zero-width space", "\u200b"},
	{"inner zero-width space", "ac\u200bme"},
	{"byte order mark", "\ufeffacme"},
	{"right-to-left override", "acme\u202etxt.exe"},
	{"zero-width joiner", "a\u200db"},
	{"soft hyphen", "ac\u00adme"},
}

// longestID is exactly MaxIDLength bytes: accepted.
var longestID = strings.Repeat("é", tenancy.MaxIDLength/2)
