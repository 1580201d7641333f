package maintenancetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// base is the suites' first instant: whole seconds, so every store round-trips it.
var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// The Lease suite's fixed knobs; the StateStore suite acquires with leaseTTL too.
const (
	leaseMaxHold = time.Hour
	leaseTTL     = 10 * time.Minute
)

// tb is the part of testing.TB the rules use, so the suite's own tests can run a rule
// against a broken implementation and see it fail.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// suite is one rule's test: the rule its failures cite and the factories of fresh
// implementations.
type suite struct {
	t         tb
	rule      string
	freshL    func() maintenance.Lease
	freshPair func() (maintenance.StateStore, maintenance.Lease)
}

func (s *suite) errorf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("rule %q broken: %s", s.rule, fmt.Sprintf(format, args...))
}

func (s *suite) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("rule %q broken: %s", s.rule, fmt.Sprintf(format, args...))
}

// rule is one subtest: its name, the rule its failures cite, and its check.
type rule struct {
	name  string
	text  string
	check func(s *suite)
}

// RunLease runs the Lease suite: one subtest per rule of maintenance.Lease. newLease
// must return a lease that was never granted and refuses renewals once
// now − AcquiredAt ≥ maxHold.
func RunLease(t *testing.T, newLease func(t *testing.T, maxHold time.Duration) maintenance.Lease) {
	t.Helper()
	for _, r := range leaseRules {
		t.Run(r.name, func(t *testing.T) {
			r.check(&suite{t: t, rule: r.text, freshL: func() maintenance.Lease {
				t.Helper()
				l := newLease(t, leaseMaxHold)
				if l == nil {
					t.Fatalf("the factory returned a nil Lease")
				}
				return l
			}})
		})
	}
}

// RunStateStore runs the StateStore suite: one subtest per rule of
// maintenance.StateStore. newStore must return an empty store and a lease that was
// never granted and whose grants fence that store.
func RunStateStore(t *testing.T, newStore func(t *testing.T) (maintenance.StateStore, maintenance.Lease)) {
	t.Helper()
	for _, r := range storeRules {
		t.Run(r.name, func(t *testing.T) {
			r.check(&suite{t: t, rule: r.text, freshPair: func() (maintenance.StateStore, maintenance.Lease) {
				t.Helper()
				st, l := newStore(t)
				if st == nil || l == nil {
					t.Fatalf("the factory returned a nil StateStore or Lease")
				}
				return st, l
			}})
		})
	}
}

// LeaseRules lists the rules RunLease checks, one line per subtest: its name, a colon,
// and the rule its failures cite.
func LeaseRules() []string { return lines(leaseRules) }

// StateStoreRules lists the rules RunStateStore checks, one line per subtest: its name, a
// colon, and the rule its failures cite.
func StateStoreRules() []string { return lines(storeRules) }

func lines(rules []rule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.name+": "+r.text)
	}
	return out
}
