package inspecttest_test

import (
	"fmt"
	"strings"

	"github.com/rotaworks/rota/inspect/inspecttest"
)

// The rules Run checks, by subtest name. An adapter's test calls
//
//	inspecttest.Run(t, func(t *testing.T) inspecttest.Stores {
//		return inspecttest.Stores{Index: newIndex(t), StateStore: newStateStore(t)}
//	})
//
// and a failure cites the rule it breaks.
func ExampleRules() {
	rules := inspecttest.Rules()
	first, _, _ := strings.Cut(rules[0], ":")
	last, _, _ := strings.Cut(rules[len(rules)-1], ":")
	fmt.Println(len(rules), "rules, from", first, "to", last)
	for _, r := range rules {
		if strings.HasPrefix(r, "DueNowClaimed:") {
			fmt.Println(r)
		}
	}
	// Output:
	// 28 rules, from OverviewWorstLaneFirst to FailingSources
	// DueNowClaimed: due-now refuses a claimed entry with 409 and writes nothing
}
