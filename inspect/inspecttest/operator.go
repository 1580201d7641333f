package inspecttest

import (
	"strings"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

func alarmHistory(f *fixture) {
	f.insp.ObserveCycle(bridge.CycleReport{Now: t0,
		Alarms:     []bridge.WaitAlarm{{Lane: "free", Wait: 15 * time.Minute}},
		LateAlarms: []bridge.LateAlarm{{Lane: "pro", UserID: "acme", Late: 20 * time.Minute}}})
	// More cycles than History (10) keeps, none with an alarm event.
	for k := 1; k <= 15; k++ {
		f.insp.ObserveCycle(bridge.CycleReport{Now: at(k * 10)})
	}
	f.clock.set(at(155))
	v := f.overview()
	if v.Cycles != 10 {
		f.fatalf("cycles_kept %d, want History, 10", v.Cycles)
	}
	if len(v.AlarmLog) != 2 {
		f.fatalf("alarm_log %+v; want both raises, which outlive the cycles kept", v.AlarmLog)
	}
	if len(v.Alarms) != 1 || v.Alarms[0].Lane != "free" {
		f.errorf("alarms %+v; want free's, still raised", v.Alarms)
	}
	wantLate := lateAlarmJSON{Lane: "pro", UserID: "acme", RaisedAt: t0, LateSeconds: 1200}
	if v.LateAlarmCount != 1 || len(v.LateAlarms) != 1 || !sameLate(v.LateAlarms[0], wantLate) {
		f.errorf("late_alarms %+v (count %d); want %+v", v.LateAlarms, v.LateAlarmCount, wantLate)
	}
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-1200)})
	var tj tenantJSON
	f.getJSON("/api/tenants/acme", 200, &tj)
	if tj.LateAlarm == nil || !sameLate(*tj.LateAlarm, wantLate) {
		f.errorf("acme's late_alarm %+v; want %+v", tj.LateAlarm, wantLate)
	}
	page := f.getHTML("/", 200)
	for _, s := range []string{"Late work", "late work", "noisy neighbour", `href="./tenants/acme"`} {
		if !strings.Contains(page, s) {
			f.errorf("the overview page lacks %q:\n%s", s, page)
		}
	}

	// Both recover; a late raise of an earlier cycle, told after, raises nothing again.
	f.insp.ObserveCycle(bridge.CycleReport{Now: at(200), Recovered: []dispatch.Lane{"free"}, LateRecovered: []string{"acme"}})
	f.insp.ObserveCycle(bridge.CycleReport{Now: at(190), LateAlarms: []bridge.LateAlarm{{Lane: "pro", UserID: "acme", Late: time.Hour}}})
	v = f.overview()
	if len(v.Alarms) != 0 || v.LateAlarmCount != 0 || len(v.LateAlarms) != 0 {
		f.errorf("after both recovered: alarms %+v, late_alarms %+v; want none", v.Alarms, v.LateAlarms)
	}
	type event struct {
		at                       time.Time
		alarm, event, lane, user string
	}
	want := []event{
		{at(200), "noisy_neighbour", "recovered", "free", ""},
		{at(200), "late_work", "recovered", "pro", "acme"},
		{at(190), "late_work", "raised", "pro", "acme"},
		{t0, "noisy_neighbour", "raised", "free", ""},
		{t0, "late_work", "raised", "pro", "acme"},
	}
	if len(v.AlarmLog) != len(want) {
		f.fatalf("alarm_log %+v; want %+v", v.AlarmLog, want)
	}
	for k, w := range want {
		e := v.AlarmLog[k]
		if got := (event{e.At, e.Alarm, e.Event, e.Lane, e.UserID}); !got.at.Equal(w.at) || got.alarm != w.alarm ||
			got.event != w.event || got.lane != w.lane || got.user != w.user {
			f.errorf("alarm_log[%d] = %+v, want %+v (newest first)", k, e, w)
		}
	}
	if e := v.AlarmLog[4]; e.LateSeconds != 1200 || e.WaitSeconds != 0 {
		f.errorf("the late raise %+v; want late_seconds 1200", e)
	}
	if e := v.AlarmLog[3]; e.WaitSeconds != 900 || e.LateSeconds != 0 {
		f.errorf("the noisy raise %+v; want wait_seconds 900", e)
	}
}

func sameLate(a, b lateAlarmJSON) bool {
	return a.Lane == b.Lane && a.UserID == b.UserID && a.RaisedAt.Equal(b.RaisedAt) && a.LateSeconds == b.LateSeconds
}

func ratePrecision(f *fixture) {
	f.setLane("acme", "pro")
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.dispatch(t0)
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "more", Tier: "hot", DueAt: at(-30)})
	limits := duework.Limits{Every: 200 * time.Millisecond, Burst: 2}
	if err := f.st.Index.Route(f.ctx, []duework.Route{{UserID: "acme", Group: "pro", Limits: limits}}); err != nil {
		f.t.Fatal(err)
	}
	f.clock.set(at(30))
	var tj tenantJSON
	f.getJSON("/api/tenants/acme", 200, &tj)
	if tj.Limits.EverySeconds != 0.2 || tj.Limits.Burst != 2 {
		f.errorf("limits %+v; want every_seconds 0.2, burst 2", tj.Limits)
	}
	for _, path := range []string{"/tenants/acme", "/lanes/pro"} {
		if page := f.getHTML(path, 200); !strings.Contains(page, "one per 200ms") || strings.Contains(page, "one per 0s") {
			f.errorf("%s does not say the rate as one per 200ms:\n%s", path, page)
		}
	}
}

func nextTurnAtCap(f *fixture) {
	f.setLane("acme", "pro")
	for _, k := range []string{"a", "b"} {
		f.schedule(duework.Entry{UserID: "acme", WorkKey: k, Tier: "hot", DueAt: at(-60)})
	}
	if err := f.st.Index.Route(f.ctx, []duework.Route{{UserID: "acme", Group: "pro", Limits: duework.Limits{MaxInFlight: 1}}}); err != nil {
		f.t.Fatal(err)
	}
	f.claim("acme", "a", t0, 5*time.Minute)
	now := at(30)
	f.clock.set(now)
	st, err := f.st.Index.User(f.ctx, "acme", now)
	if err != nil {
		f.t.Fatal(err)
	}
	var tj tenantJSON
	f.getJSON("/api/tenants/acme", 200, &tj)
	if !tj.AtInFlightCap || tj.Ready || tj.InFlight != 1 || !tj.Turn.Equal(st.Turn) {
		f.errorf("tenant %+v; want at_in_flight_cap, not ready, in_flight 1, turn %v as User says", tj, st.Turn)
	}
	page := f.getHTML("/tenants/acme", 200)
	if !strings.Contains(page, "as soon as one of its runs completes") || !strings.Contains(page, "1 of at most 1") {
		f.errorf("the tenant page does not say acme is served when a run completes:\n%s", page)
	}
	// Below its cap it is ready, and the page says so.
	if err := f.st.Index.Route(f.ctx, []duework.Route{{UserID: "acme", Group: "pro", Limits: duework.Limits{MaxInFlight: 2}}}); err != nil {
		f.t.Fatal(err)
	}
	tj = tenantJSON{}
	f.getJSON("/api/tenants/acme", 200, &tj)
	if tj.AtInFlightCap || !tj.Ready {
		f.errorf("below its cap: %+v; want ready, not at its cap", tj)
	}
}
