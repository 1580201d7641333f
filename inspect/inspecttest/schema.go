package inspecttest

import "time"

// The JSON the Inspector serves, as the inspect package doc documents it. The suite
// decodes every answer into these with unknown fields refused, so a field renamed or added
// without its documentation fails it.

type limitsJSON struct {
	Weight       int     `json:"weight"`
	MaxInFlight  int     `json:"max_in_flight"`
	EverySeconds float64 `json:"every_seconds"`
	Burst        int     `json:"burst"`
}

type capacityJSON struct {
	PerUserLimit  int `json:"per_user_limit"`
	PerCycleLimit int `json:"per_cycle_limit"`
	MinShare      int `json:"min_share"`
	PerUserBurst  int `json:"per_user_burst"`
}

type userItemsJSON struct {
	UserID string `json:"user_id"`
	Items  int    `json:"items"`
}

type overdueJSON struct {
	UserID      string    `json:"user_id"`
	DueAt       time.Time `json:"due_at"`
	LateSeconds float64   `json:"late_seconds"`
}

type alarmJSON struct {
	Lane        string          `json:"lane"`
	RaisedAt    time.Time       `json:"raised_at"`
	WaitSeconds float64         `json:"wait_seconds"`
	Crowding    []userItemsJSON `json:"crowding"`
}

type lateAlarmJSON struct {
	Lane        string    `json:"lane"`
	UserID      string    `json:"user_id"`
	RaisedAt    time.Time `json:"raised_at"`
	LateSeconds float64   `json:"late_seconds"`
}

type laneCycleJSON struct {
	At          time.Time `json:"at"`
	Users       int       `json:"users"`
	Dispatched  int       `json:"dispatched"`
	Shed        int       `json:"shed"`
	Limited     int       `json:"limited"`
	LostClaims  int       `json:"lost_claims"`
	WaitSeconds float64   `json:"wait_seconds"`
	LateSeconds float64   `json:"late_seconds"`
}

type laneJSON struct {
	Lane         string          `json:"lane"`
	Priority     int             `json:"priority"`
	Capacity     capacityJSON    `json:"capacity"`
	WaitSeconds  float64         `json:"wait_seconds"`
	WaitingSince time.Time       `json:"waiting_since,omitzero"`
	NextUser     string          `json:"next_user,omitempty"`
	AsOf         time.Time       `json:"as_of,omitzero"`
	LateSeconds  float64         `json:"late_seconds"`
	OldestDue    time.Time       `json:"oldest_due,omitzero"`
	Overdue      []overdueJSON   `json:"overdue"`
	Crowding     []userItemsJSON `json:"crowding"`
	Alarm        *alarmJSON      `json:"alarm,omitempty"`
	Cycles       []laneCycleJSON `json:"cycles"`
	Error        string          `json:"error,omitempty"`
}

type groupWaitJSON struct {
	WaitSeconds  float64   `json:"wait_seconds"`
	WaitingSince time.Time `json:"waiting_since,omitzero"`
	NextUser     string    `json:"next_user,omitempty"`
	Error        string    `json:"error,omitempty"`
}

type unroutedJSON struct {
	UserID string `json:"user_id"`
	Reason string `json:"reason"`
}

type cycleJSON struct {
	At              time.Time `json:"at"`
	Source          string    `json:"source"`
	Dispatched      int       `json:"dispatched"`
	Shed            int       `json:"shed"`
	Unrouted        int       `json:"unrouted"`
	Hits            int       `json:"hits"`
	Misses          int       `json:"misses"`
	Removed         int       `json:"removed"`
	Errors          int       `json:"errors"`
	LostClaims      int       `json:"lost_claims"`
	Released        int       `json:"released"`
	Expired         int       `json:"expired"`
	Paused          int       `json:"paused"`
	Duplicates      int       `json:"duplicates"`
	DispatchSeconds float64   `json:"dispatch_seconds"`
	DurationSeconds float64   `json:"duration_seconds"`
	Error           string    `json:"error,omitempty"`
}

type alarmEventJSON struct {
	At          time.Time `json:"at"`
	Alarm       string    `json:"alarm"`
	Event       string    `json:"event"`
	Lane        string    `json:"lane"`
	UserID      string    `json:"user_id,omitempty"`
	WorkKey     string    `json:"work_key,omitempty"`
	WaitSeconds float64   `json:"wait_seconds,omitempty"`
	LateSeconds float64   `json:"late_seconds,omitempty"`
	ErrorStreak int       `json:"error_streak,omitempty"`
}

type pausedJSON struct {
	UserID      string    `json:"user_id"`
	Reason      string    `json:"reason"`
	Until       time.Time `json:"until"`
	LeftSeconds float64   `json:"left_seconds"`
}

type failingJSON struct {
	Lane        string    `json:"lane"`
	UserID      string    `json:"user_id"`
	WorkKey     string    `json:"work_key"`
	ErrorStreak int       `json:"error_streak"`
	Since       time.Time `json:"since"`
	LastRunAt   time.Time `json:"last_run_at"`
	NextDue     time.Time `json:"next_due"`
	Error       string    `json:"error,omitempty"`
}

type postureJSON struct {
	Posture            string  `json:"posture"`
	Source             string  `json:"source"`
	Holder             string  `json:"holder,omitempty"`
	Waiters            int     `json:"waiters"`
	LongestWaitSeconds float64 `json:"longest_wait_seconds"`
	Error              string  `json:"error,omitempty"`
}

type overviewJSON struct {
	Now                time.Time        `json:"now"`
	Lanes              []laneJSON       `json:"lanes"`
	UnroutedGroup      groupWaitJSON    `json:"unrouted_group"`
	UnroutedUsers      []unroutedJSON   `json:"unrouted_users"`
	UnroutedCount      int              `json:"unrouted_count"`
	Alarms             []alarmJSON      `json:"alarms"`
	LateAlarms         []lateAlarmJSON  `json:"late_alarms"`
	LateAlarmCount     int              `json:"late_alarm_count"`
	Paused             []pausedJSON     `json:"paused"`
	PausedNext         string           `json:"paused_next,omitempty"`
	PausedError        string           `json:"paused_error,omitempty"`
	FailingSources     []failingJSON    `json:"failing_sources"`
	FailingSourceCount int              `json:"failing_source_count"`
	AlarmAfterErrors   int              `json:"alarm_after_errors"`
	AlarmLog           []alarmEventJSON `json:"alarm_log"`
	LastCycle          *cycleJSON       `json:"last_cycle,omitempty"`
	Cycles             int              `json:"cycles_kept"`
	Maintenance        *postureJSON     `json:"maintenance,omitempty"`
	Actions            bool             `json:"actions"`
}

type pausedViewJSON struct {
	Now     time.Time    `json:"now"`
	Paused  []pausedJSON `json:"paused"`
	After   string       `json:"after,omitempty"`
	Next    string       `json:"next,omitempty"`
	Actions bool         `json:"actions"`
}

type laneUserJSON struct {
	Position      int        `json:"position"`
	UserID        string     `json:"user_id"`
	Turn          time.Time  `json:"turn"`
	WaitedSeconds float64    `json:"waited_seconds"`
	LastServed    time.Time  `json:"last_served,omitzero"`
	Limits        limitsJSON `json:"limits"`
	InFlight      int        `json:"in_flight"`
	OldestDue     time.Time  `json:"oldest_due,omitzero"`
	LateSeconds   float64    `json:"late_seconds"`
	More          bool       `json:"more"`
}

type laneViewJSON struct {
	Now     time.Time      `json:"now"`
	Lane    laneJSON       `json:"lane"`
	Users   []laneUserJSON `json:"users"`
	After   string         `json:"after,omitempty"`
	Next    string         `json:"next,omitempty"`
	Actions bool           `json:"actions"`
}

type entryJSON struct {
	WorkKey      string    `json:"work_key"`
	Tier         string    `json:"tier"`
	DueAt        time.Time `json:"due_at"`
	LastRunAt    time.Time `json:"last_run_at,omitzero"`
	MissStreak   int       `json:"miss_streak"`
	ErrorStreak  int       `json:"error_streak"`
	Failing      bool      `json:"failing"`
	ClaimedUntil time.Time `json:"claimed_until,omitzero"`
	Status       string    `json:"status"`
	LateSeconds  float64   `json:"late_seconds"`
}

type tenantJSON struct {
	Now            time.Time      `json:"now"`
	UserID         string         `json:"user_id"`
	Group          string         `json:"group"`
	Lane           string         `json:"lane,omitempty"`
	Limits         limitsJSON     `json:"limits"`
	LastServed     time.Time      `json:"last_served,omitzero"`
	Turn           time.Time      `json:"turn,omitzero"`
	HeldUntil      time.Time      `json:"held_until,omitzero"`
	InFlight       int            `json:"in_flight"`
	PausedUntil    time.Time      `json:"paused_until,omitzero"`
	PauseReason    string         `json:"pause_reason,omitempty"`
	PauseLeft      float64        `json:"pause_left_seconds"`
	AtInFlightCap  bool           `json:"at_in_flight_cap"`
	Ready          bool           `json:"ready"`
	WaitedSeconds  float64        `json:"waited_seconds"`
	UnroutedReason string         `json:"unrouted_reason,omitempty"`
	LateAlarm      *lateAlarmJSON `json:"late_alarm,omitempty"`
	Entries        []entryJSON    `json:"entries"`
	After          string         `json:"after,omitempty"`
	Next           string         `json:"next,omitempty"`
	Actions        bool           `json:"actions"`
}

type waiterJSON struct {
	Task        string    `json:"task"`
	Since       time.Time `json:"since"`
	WaitSeconds float64   `json:"wait_seconds"`
	Reason      string    `json:"reason"`
	Blocker     string    `json:"blocker,omitempty"`
}

type gaugeJSON struct {
	At                 time.Time    `json:"at"`
	Posture            string       `json:"posture"`
	Holder             string       `json:"holder,omitempty"`
	HolderTask         string       `json:"holder_task,omitempty"`
	HeldForSeconds     float64      `json:"held_for_seconds"`
	Waiters            []waiterJSON `json:"waiters"`
	LongestWaitSeconds float64      `json:"longest_wait_seconds"`
	ChainDepth         int          `json:"chain_depth"`
}

type taskJSON struct {
	Name          string    `json:"name"`
	Class         string    `json:"class"`
	Rank          string    `json:"rank"`
	LastRunAt     time.Time `json:"last_run_at,omitzero"`
	LastOutcome   string    `json:"last_outcome,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
	Running       bool      `json:"running"`
	RunningSince  time.Time `json:"running_since,omitzero"`
	RunningBy     string    `json:"running_by,omitempty"`
	RunningUntil  time.Time `json:"running_until,omitzero"`
	DeferredSince time.Time `json:"deferred_since,omitzero"`
	DeferredAt    time.Time `json:"deferred_at,omitzero"`
	Deferrals     int       `json:"deferrals"`
	DeferReason   string    `json:"defer_reason,omitempty"`
	DeferBlocker  string    `json:"defer_blocker,omitempty"`
	WaitSeconds   float64   `json:"wait_seconds"`
}

type deferralJSON struct {
	Task    string    `json:"task"`
	Reason  string    `json:"reason"`
	Blocker string    `json:"blocker,omitempty"`
	Since   time.Time `json:"since,omitzero"`
}

type pollJSON struct {
	At             time.Time      `json:"at"`
	Winner         string         `json:"winner,omitempty"`
	Heavy          string         `json:"heavy,omitempty"`
	SecondPass     []string       `json:"second_pass"`
	Deferred       []deferralJSON `json:"deferred"`
	Posture        string         `json:"posture"`
	TurnedDegraded bool           `json:"turned_degraded"`
	Recovered      bool           `json:"recovered"`
	Error          string         `json:"error,omitempty"`
}

type maintenanceJSON struct {
	Now      time.Time  `json:"now"`
	Source   string     `json:"source"`
	Gauge    *gaugeJSON `json:"gauge,omitempty"`
	Tasks    []taskJSON `json:"tasks"`
	Fence    uint64     `json:"fence_token"`
	LastPoll *pollJSON  `json:"last_poll,omitempty"`
	Error    string     `json:"error,omitempty"`
}

type actionJSON struct {
	Action       string      `json:"action"`
	UserID       string      `json:"user_id"`
	WorkKey      string      `json:"work_key,omitempty"`
	Outcome      string      `json:"outcome"`
	Message      string      `json:"message"`
	Entry        *entryJSON  `json:"entry,omitempty"`
	Group        string      `json:"group,omitempty"`
	Limits       *limitsJSON `json:"limits,omitempty"`
	ClaimedUntil time.Time   `json:"claimed_until,omitzero"`
	PausedUntil  time.Time   `json:"paused_until,omitzero"`
	PauseReason  string      `json:"pause_reason,omitempty"`
	Error        string      `json:"error,omitempty"`
}

type errorJSON struct {
	Error string `json:"error"`
}
