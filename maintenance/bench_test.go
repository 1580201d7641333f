package maintenance_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			in := maintenance.PickInput{Now: t0, YieldAfter: 30 * time.Minute}
			for i := range n {
				c := cand(heavy(fmt.Sprintf("t%d", i), time.Duration(i+1)*time.Hour), time.Duration(i%5)*time.Hour)
				if i%3 == 0 {
					c.WaitingSince = t0.Add(-time.Duration(i) * time.Minute)
				}
				in.Candidates = append(in.Candidates, c)
			}
			b.ReportAllocs()
			for b.Loop() {
				maintenance.Pick(in)
			}
		})
	}
}

func BenchmarkPoll(b *testing.B) {
	tasks := []maintenance.Task{heavy("summary", 10*time.Minute), heavy("dream", time.Hour),
		heavy("backfill", 6*time.Hour), offLease("golden-path", time.Hour), offLease("heartbeat", time.Minute)}
	s, err := maintenance.NewScheduler(tasks, maintenance.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Poll(bg, t0); err != nil { // summary and the off-lease tasks now run
		b.Fatal(err)
	}
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		now = now.Add(time.Second)
		if _, err := s.Poll(bg, now); err != nil {
			b.Fatal(err)
		}
	}
}
