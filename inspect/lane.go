package inspect

import (
	"context"
	"strconv"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// laneView builds the lane page of lane k at now: its summary and the users from position
// after+1 on, in turn order, read with one Ready of after+limit users and no hold. It costs
// after+limit users; maxLaneDepth bounds it.
func (i *Inspector) laneView(ctx context.Context, now time.Time, k int, after, limit int) (laneViewJSON, error) {
	cycles, _, alarms := i.snapshot()
	raised := map[dispatch.Lane]alarmRecord{}
	for _, a := range alarms.noisy {
		raised[a.lane] = a
	}
	lc := i.lanes[k]
	v := laneViewJSON{Now: utc(now), Lane: i.laneSummary(ctx, now, k, cycles, raised), Users: []laneUserJSON{}, Actions: i.actions}
	if after > 0 {
		v.After = strconv.Itoa(after)
	}
	page, err := i.idx.Ready(ctx, duework.ReadyQuery{Group: string(lc.Lane), Now: now, Users: after + limit, PerUser: 1})
	if err != nil {
		return laneViewJSON{}, &storeError{"reading the lane", err}
	}
	for n, h := range page.Heads {
		if n < after {
			continue
		}
		u := laneUserJSON{Position: n + 1, UserID: h.UserID, Turn: utc(h.Turn), WaitedSeconds: since(now, h.Turn),
			LastServed: utc(h.LastServed), Limits: limitsOf(h.Limits), InFlight: h.InFlight, More: h.More}
		if len(h.Due) > 0 {
			u.OldestDue, u.LateSeconds = utc(h.Due[0].DueAt), since(now, h.Due[0].DueAt)
		}
		v.Users = append(v.Users, u)
	}
	if !page.Next.IsZero() && after+limit < maxLaneDepth {
		v.Next = strconv.Itoa(after + limit)
	}
	return v, nil
}
