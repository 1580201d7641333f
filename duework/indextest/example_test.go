package indextest_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/tenancy"
)

// The rules Run checks, by subtest name. An adapter's test calls
// indextest.Run(t, newIndex); a failure cites the rule it breaks.
func ExampleRules() {
	var names []string
	for _, r := range indextest.Rules() {
		name, _, _ := strings.Cut(r, ":")
		names = append(names, name)
	}
	fmt.Println(len(names), "rules, from", names[0], "to", names[len(names)-1])
	for _, r := range indextest.Rules() {
		if strings.HasPrefix(r, "HoldHides:") {
			fmt.Println(r)
		}
	}
	// Output:
	// 92 rules, from GetReturnsScheduled to StateMachine
	// HoldHides: Ready with a Hold holds the users it returns until Now+Hold: a Ready whose Now is before that skips them
}

// The Model is the Index Run compares others with, and one that tests of code built on an
// Index can trust: here two dispatchers reading one queue with holds read disjoint users,
// as every Index must let them.
func ExampleModel() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := indextest.NewModel()
	for i, user := range []string{"amy", "bo", "cy"} {
		tc, _ := tenancy.NewContext(user)
		_ = idx.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: "feed", DueAt: now.Add(time.Duration(i-3) * time.Minute)})
	}
	read := func(who string) {
		page, _ := idx.Ready(ctx, duework.ReadyQuery{Now: now, Users: 2, PerUser: 1, Hold: 30 * time.Second})
		fmt.Print(who, " reads")
		for _, h := range page.Heads {
			fmt.Print(" ", h.UserID)
		}
		fmt.Println()
	}
	read("dispatcher 1")
	read("dispatcher 2")
	read("dispatcher 3")
	// Output:
	// dispatcher 1 reads amy bo
	// dispatcher 2 reads cy
	// dispatcher 3 reads
}
