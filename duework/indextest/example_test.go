package indextest_test

import (
	"fmt"
	"strings"

	"github.com/rotaworks/rota/duework/indextest"
)

// The rules Run checks, by subtest name. An adapter's test calls
// indextest.Run(t, newIndex); a failure cites the rule it breaks.
func ExampleRules() {
	var names []string
	for _, r := range indextest.Rules() {
		name, _, _ := strings.Cut(r, ":")
		names = append(names, name)
	}
	fmt.Println(strings.Join(names, " "))
	fmt.Println(len(indextest.Rules()), "rules")
	// Output:
	// GetReturnsScheduled ScheduleReplaces GetAbsent Unschedule DueBeforeOrder DueBeforeLimit DueHeadsOrder DueHeadsMore LastServed IsolationGet IsolationSchedule IsolationUnschedule IsolationComplete ClaimOrder ClaimSkips ClaimHides ClaimExpires ClaimFollowsNow FreshTokens Complete CompleteStale CompletePastUntil CompleteForged ScheduleEndsClaim UnscheduleClaimed GetClaimed BadInput ParallelClaimers StateMachine
	// 29 rules
}
