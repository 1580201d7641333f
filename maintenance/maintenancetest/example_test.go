package maintenancetest_test

import (
	"fmt"
	"strings"

	"github.com/rotaworks/rota/maintenance/maintenancetest"
)

// The rules RunLease and RunStateStore check, by subtest name; a failure cites the rule
// it breaks.
func ExampleLeaseRules() {
	for _, rules := range [][]string{maintenancetest.LeaseRules(), maintenancetest.StateStoreRules()} {
		var names []string
		for _, r := range rules {
			name, _, _ := strings.Cut(r, ":")
			names = append(names, name)
		}
		fmt.Println(strings.Join(names, " "))
	}
	// Output:
	// FreeLease AcquireGrants HeldRefusesAll OneConcurrentWinner TokensGrow LapseAtExpiry RenewExtends MaxHold StaleGrant RenewExpired Release BadInput BadHolder TimeRange
	// Empty RoundTrip Replace Order StaleToken FenceRises FenceFollowsLease InvalidState TokenRange DuplicateName Ownership ConcurrentSaves UpdateReads UpdateWrites UpdateRaisesFence UpdateFenceFollowsLease UpdateError UpdateInvalid UpdateOwnership UpdateAtomic OneClaimWins OneRunAcrossSchedulers ClaimAfterStaleRead
}
