package maintenancetest_test

import (
	"fmt"

	"github.com/rotaworks/rota/maintenance/maintenancetest"
)

// The rules an adapter must keep; each is a subtest of RunLease or RunStateStore.
func ExampleLeaseRules() {
	for _, r := range maintenancetest.LeaseRules() {
		fmt.Println(r)
	}
	fmt.Println(len(maintenancetest.StateStoreRules()), "state store rules")
	// Output:
	// a free lease has no current grant
	// acquire grants holder a positive token until at most now+ttl
	// a live grant refuses every acquirer, its holder included
	// exactly one of many concurrent acquirers wins
	// tokens strictly increase across grants
	// a grant lapses at its expiry and another holder acquires
	// renew extends the grant and keeps its token and AcquiredAt
	// a holder past MaxHold cannot renew and a new holder gets the lease within one TTL
	// a stale token cannot renew or release
	// renewing an expired grant is ErrNotHolder
	// release frees the lease and a second release is ErrNotHolder
	// bad input wraps ErrInvalid and changes nothing
	// 10 state store rules
}
