package tenancytest_test

import (
	"fmt"
	"strings"

	"github.com/rotaworks/rota/tenancy/tenancytest"
)

// The rules the Run functions check, by subtest name. An adapter's test calls
// tenancytest.RunWatchlist(t, newWatchlist); a failure cites the rule it breaks.
func ExampleRules() {
	byIface := map[string][]string{}
	var order []string
	for _, r := range tenancytest.Rules() {
		name, _, _ := strings.Cut(r, ":")
		iface, sub, _ := strings.Cut(name, "/")
		if byIface[iface] == nil {
			order = append(order, iface)
		}
		byIface[iface] = append(byIface[iface], sub)
	}
	for _, iface := range order {
		fmt.Println(iface+":", strings.Join(byIface[iface], " "))
	}
	// Output:
	// Watchlist: AddGet AddReplaces GetAbsent Remove ListOrder CrossTenant SharedSlugs Forbidden NoTenant DoneContext BadIDs BadTier AddedAtRange Concurrent GetMany GetManyCrossTenant GetManyDoneContext AddMany AddManyAllOrNothing AddManyDuplicates AddAll AddAllAllOrNothing AddManyCrossTenant Tenants TenantsBounds TenantsMembership StateMachine
	// Repository: PutGet PutReplaces GetAbsent Delete ListOrder CrossTenant SharedIDs NoTenant DoneContext BadIDs Concurrent StateMachine
	// Entitlements: DefaultFree SetPlan HostPlans InvalidPlan CrossTenant SetPlans NoTenant DoneContext Concurrent StateMachine
}
