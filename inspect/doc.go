// Package inspect serves the pages an operator opens when a tenant says its syncs are late:
// which lane keeps tenants waiting and for how long, who goes next in it, where one tenant
// and each of its entries stand, which tenants are paused and which sources keep failing,
// and how maintenance is doing. Every page is server-rendered HTML (html/template, no
// JavaScript) with a JSON twin under /api, and four actions, off by default, make an entry
// due now, re-route a tenant, and pause and resume one.
//
// # Mounting
//
// An [Inspector] is an http.Handler with no authentication of its own: mount it behind the
// host's, under a prefix of the host's choosing. Its links are relative, so they work
// under any prefix stripped with http.StripPrefix:
//
//	insp, err := inspect.New(inspect.Config{Index: idx, Lanes: lanes, Dispatcher: d, StateStore: states})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/ops/rota/", requireOperator(http.StripPrefix("/ops/rota", insp)))
//
// Tell it the reports it shows: it is a bridge.Observer (RunnerConfig.Observer), a
// dispatch.Observer (dispatch.Config.Observer, for a dispatcher that feeds its own queues)
// and a maintenance.Observer (maintenance.Config.Observer). It keeps the last
// Config.History cycle reports and as many poll reports; a Runner's report replaces the
// Dispatcher's report of the same cycle (same now). Alarms come from the Runner's reports
// only — noisy-neighbour alarms per lane and late-work alarms per tenant, raised and
// recovered — and the Inspector keeps their last 500 events in a ring of their own, so an
// alarm outlives the cycles kept. Combine it with other observers with bridge.Observers.
//
// Failing sources come from the Runner's reports too: a source is failing once a report
// shows its run failed and the ErrorStreak written back reached Config.AlarmAfterErrors
// (set it to the Runner's, default 5), and it is dropped when a later report shows it
// succeeded (a hit or a miss, logged in the alarm log as recovered) or removed. The
// Inspector hears only its own process's Runner, so a source run by a Runner elsewhere
// (another replica, or workers fed through a queue) is not listed: a listed source whose
// next run no report tells of is dropped a whole retry interval (at least a minute) after
// that run was due, as by then another process ran it or the host unscheduled it. The
// tenant page reads every entry's ErrorStreak from the index itself, so it is right
// wherever the runs happen.
//
// # Pages
//
// Each view is an HTML page at its path and the same data as JSON at /api plus that path:
//
//   - / is the overview: every lane, the one that keeps a tenant waiting longest first,
//     with its wait now, how late its most overdue work was at the last cycle, a chart of
//     its last cycles, the raised noisy-neighbour alarms with who crowds the lane, the
//     tenants whose work raised a late-work alarm, the failing sources, the alarm log, the
//     paused tenants, the tenants waiting to be routed, the last cycle and the
//     maintenance posture;
//   - /lanes/{lane} is one lane: who goes next in turn order, how long each has waited,
//     their limits and in-flight counts;
//   - /tenants/{id} is one tenant: its group, limits, LastServed, Turn, hold and in-flight
//     count — at its in-flight cap, that it is served again as soon as one of its runs
//     completes — its pause (until when, and why), its late-work alarm, and its entries
//     in work-key order with their miss and error streaks;
//   - /paused lists the tenants paused now, in tenant ID order, by a pipeline's pushback
//     or by an operator;
//   - /maintenance is the stall gauge and every task's state, read from the StateStore.
//
// A lane or tenant ID is one percent-encoded path segment (url.PathEscape: "a/b" is
// /tenants/a%2Fb). An ID that is "." or ".." cannot be a path segment, since clients
// resolve it away; /tenants/?id=ID and /lanes/?id=ID address any ID. The tenant search
// form in every page's header uses the former.
//
// Lists take ?limit= (default 50, at most 500) and ?after=, and return
// `next`, the ?after= of the next page, when there is more. A tenant's entries page by
// work key (after is the last key shown), the paused tenants by tenant ID (after is the
// last ID shown). A lane's users page by position in turn order
// (after is the number of users before the page); since a lane's order changes with every
// cycle, a later page may repeat or skip a user. Pages also take ?refresh=N (5 to 3600) to
// reload themselves every N seconds.
//
// # Actions
//
// With Config.Actions, and only then (otherwise every action answers 403):
//
//   - POST /api/tenants/{id}/entries/{key}/due-now makes the entry due now, keeping its
//     tier, streaks and last run, so it runs at the tenant's next turn in its lane. An
//     entry claimed at now is refused with 409: it is running, and a run never overlaps
//     itself. An entry due by now plus the Dispatcher's MaxClockSkew is left as it is
//     (outcome already_due): no dispatcher whose clock is within that skew can claim an
//     entry due later before the write lands, so the write never ends a claim.
//   - POST /api/tenants/{id}/reroute resolves the tenant's lane and limits again with
//     Dispatcher.Reroute, after a plan change.
//   - POST /api/tenants/{id}/pause?for=D pauses the tenant from now for D, with the reason
//     "operator" (Index.Pause), on every dispatcher sharing the index: none serves it
//     before the pause ends, and its runs under way run on. D is a duration such as 90m
//     or 2h, or a number of seconds, from 1s to 720h (30 days); anything else is refused
//     with 400. The pause ends at now + D, to the second below. A pause that ends later —
//     a pushback's, or an operator's — stands as it is (outcome already_paused): a pause
//     is never shortened; resume first to pause for less. A tenant the index does not
//     store is refused with 404, so a mistyped ID stores nothing.
//   - POST /api/tenants/{id}/resume ends the tenant's pause at once, whatever paused it
//     (outcome resumed, or not_paused when it was not). The entry whose run was pushed
//     back stays due at the pause's end: make it due now to run it sooner.
//
// The pages' forms post to /actions/due-now, /actions/reroute, /actions/pause and
// /actions/resume (form fields tenant, key and for) and answer 303 to the tenant's page,
// which says how the action ended. Every POST is
// guarded by http.CrossOriginProtection (a cross-origin request is refused with 403), and
// every action is logged through the Config's Logger, one line each: Info when it was
// carried out or had nothing to do, Warn when it was refused or failed.
//
// # Cost
//
// Every page costs what it shows; none reads every user or every entry, and no count that
// would need to is shown. The overview reads one user per lane with Index.Ready (no hold,
// so it delays no dispatcher) and, with a StateStore, one StateStore.Load; the lane page
// one Ready of after+limit users (5,000 at most); the tenant page one Index.User
// and one Index.Entries of limit+1; the overview also one Index.Paused of 21 users and the
// paused page one of limit+1 (each costs what it returns, plus the ended pauses it steps
// over); the maintenance page two Loads; due-now one Entries and one Schedule; reroute two
// User calls and one Reroute; pause two User calls and one Pause; resume one User and one
// Resume. Everything else comes from the kept reports, whose size is bounded by History,
// and the failing sources and alarms, at most 1,000 of each kind.
//
// The maintenance gauge is maintenance.ReadGauge's, from the StateStore alone, without the
// Lease: its holder is the scheduler whose heavy run's claim holds, and its posture counts
// a wait as a stall past maintenance.DefaultDegradeAfter. The last poll's own posture is on
// the page too.
//
// # JSON
//
// Field names are snake_case and stable; times are RFC 3339 in UTC, and a time that would
// be zero is left out; durations are float seconds, in fields named …_seconds; lists are
// always present, possibly empty. An error answers its status with {"error": "…"}: 400
// for a bad ID or query, 403 for a refused action, 404 for an unknown lane, tenant or
// entry, 409 for due-now on a claimed entry, 500 when the Index, the StateStore or the
// Dispatcher failed.
//
// The text of a store's error never reaches a page or a JSON answer, since it may carry a
// database's words: where the Index, the StateStore or the Dispatcher failed, and where a
// report carries an error (a cycle's, a poll's, a tenant's unrouted reason other than an
// unknown lane, a plan the table lacks or invalid limits), the page says what failed and
// gives a reference, and the Inspector logs the error once under it (Error for its own
// reads and writes, Warn for a report's), with the keys "ref" and "error". A failing
// source's last error is the cycle's: its reference is the one under which the cycle's
// errors, all of its failed items', are logged. A task's
// LastError is the task's own message and is shown as it was stored.
//
// A lane (the overview's `lanes`, the lane page's `lane`):
//   - `lane`, `priority` (its place in Config.Lanes, 0 highest) and `capacity`: its
//     `per_user_limit`, `per_cycle_limit`, `min_share` and `per_user_burst`;
//   - `wait_seconds`: how long its first ready user has waited now, now − its Turn, 0 when
//     nobody is ready; `waiting_since` is that Turn and `next_user` that user;
//   - `as_of`: the latest cycle that reported the lane, which the next four fields describe;
//   - `late_seconds`: how late its most overdue work was at that cycle (its now − the
//     lane report's OldestDue); `oldest_due` is that DueAt;
//   - `overdue`: the users read with the oldest due work, each `user_id`, `due_at` and
//     `late_seconds` (at that cycle);
//   - `crowding`: the users that got the most items in that cycle, each `user_id` and
//     `items`;
//   - `alarm`: the lane's raised noisy-neighbour alarm, absent when none: `lane`,
//     `raised_at` (the cycle that raised it), `wait_seconds` (the wait that raised it) and
//     `crowding` (who got the most items then);
//   - `cycles`: the kept cycles, oldest first, each `at`, `users` (read), `dispatched`,
//     `shed`, `limited`, `lost_claims`, `wait_seconds` (its now − WaitingSince) and
//     `late_seconds`;
//   - `error`: that the lane could not be read now (withheld, as above).
//
// The overview, GET /api/: `now`; `lanes`, worst first (a lane that could not be read,
// then the longest wait_seconds, then the greatest late_seconds, then priority);
// `paused`, the first 20 tenants paused now in tenant ID order, each `user_id`,
// `reason` ("operator", or the Reason of the pushback that paused it), `until` and
// `left_seconds` (until − now), with `paused_next`, the ?after= of /paused's next page
// when there are more, and `paused_error` when they could not be read (withheld, as
// above); `failing_sources`, the failing sources oldest first, at most 50, each `lane`,
// `user_id`, `work_key`, `error_streak` (as its last report wrote it), `since` (the first
// cycle that found it failing), `last_run_at` (its last run's end), `next_due` (when it is
// tried next) and `error` (its last error, withheld), with `failing_source_count`, all of
// them, and `alarm_after_errors`, the ErrorStreak that makes a source failing (negative
// when failing sources are off);
// `unrouted_group`, the new users waiting for a lane (`wait_seconds`, `waiting_since`,
// `next_user`, `error` as for a lane); `unrouted_users`, up to 20 users the last cycle
// could not route, each `user_id` and `reason`, and `unrouted_count`, all of them;
// `alarms`, the raised noisy-neighbour alarms, by lane; `late_alarms`, the raised
// late-work alarms, oldest raise first, at most 50, each `lane`, `user_id`, `raised_at`
// and `late_seconds` (how late the tenant's oldest work was when it was raised), and
// `late_alarm_count`, all of them; `alarm_log`, the last 500 alarm events, newest first,
// each `at` (the cycle that reported it), `alarm` ("noisy_neighbour", "late_work" or
// "failing_source"), `event` ("raised" or "recovered"), `lane` ("" for a late-work
// recovery whose raise the Inspector did not see), `user_id` (late work and failing
// sources), `work_key` (failing sources), and for a raise `wait_seconds` (noisy
// neighbour), `late_seconds` (late work) or `error_streak` (a failing source: the streak
// first seen at or over the threshold); `last_cycle`: `at`, `source` ("bridge"
// for a Runner's report, "dispatch" for a Dispatcher's), `dispatched`, `shed`,
// `unrouted`, the Runner's `hits`, `misses`, `removed`, `errors`, `released` and
// `expired` (handed back unstarted because their claim ended, or was about to, before a
// worker was free), `paused` (runs whose pipeline pushed back, pausing their tenant),
// `duplicates` (copies of an item not run because another had started),
// `lost_claims` (at dispatch and at run), `dispatch_seconds`,
// `duration_seconds` and `error`; `cycles_kept`; `maintenance`, absent
// without a StateStore or a poll report: `posture`, `source`, `holder`, `waiters` (their
// number), `longest_wait_seconds` and `error`; and `actions`, whether the actions are on.
//
// A lane page, GET /api/lanes/{lane}: `now`, `lane`, `after`, `next`, `actions`, and
// `users` in turn order, each `position` (1 is next), `user_id`, `turn`, `waited_seconds`
// (now − turn), `last_served`, `limits`, `in_flight`, `oldest_due` and `late_seconds` (its
// oldest visible entry's DueAt and now − it, absent when its limits hold all back) and
// `more` (it has visible entries beyond the first). Users that a dispatcher holds at that
// instant are not listed.
//
// Limits, wherever they appear: `weight`, `max_in_flight`, `every_seconds` and `burst`, as
// duework.Limits stores them (0 is the default of each).
//
// A tenant page, GET /api/tenants/{id}: `now`, `user_id`, `group` ("" while unrouted),
// `lane` (the group when it names a configured lane), `limits`, `last_served`, `turn`,
// `held_until` (the end of a dispatcher's hold, absent when none), `in_flight`,
// `paused_until` and `pause_reason` (its pause, absent when it is not paused now) and
// `pause_left_seconds` (paused_until − now, 0 when not paused),
// `at_in_flight_cap` (in_flight has reached max_in_flight: the tenant is served again as
// soon as one of its runs completes, and `turn` is when it would be if none did), `ready`
// (its turn has come) and `waited_seconds` (now − turn when ready), `unrouted_reason` (why
// the last cycle could not route it), `late_alarm` (its raised late-work alarm, as in
// late_alarms; absent when none), `after`, `next`, `actions`, and `entries` in work-key
// order, each `work_key`, `tier`, `due_at`, `last_run_at`, `miss_streak`, `error_streak`
// (its consecutive failed runs), `failing` (error_streak has reached alarm_after_errors),
// `claimed_until`
// (its current claim's end, absent when it has none), `status` ("claimed" while its claim
// runs, else "due" once due_at has passed, else "scheduled") and `late_seconds` (now −
// due_at, when due).
//
// The paused tenants, GET /api/paused: `now`, `after`, `next`, `actions`, and `paused`,
// each as in the overview.
//
// The maintenance page, GET /api/maintenance: `now`; `source` ("state_store", "last_poll"
// or "none"); `gauge`, absent without either: `at`, `posture` ("healthy", "degraded",
// "disabled" or "unknown"), `holder`, `holder_task`, `held_for_seconds`, `waiters` (longest
// first, each `task`, `since`, `wait_seconds`, `reason` and `blocker`),
// `longest_wait_seconds` and `chain_depth`; `tasks`, every task state by name, each
// `name`, `class`, `rank`, `last_run_at`, `last_outcome`, `last_error`, `running` (its
// run's claim holds now), `running_since`, `running_by`, `running_until` (the end of that
// claim, which its scheduler moves forward while the run lasts), `deferred_since`,
// `deferred_at`, `deferrals`,
// `defer_reason`, `defer_blocker` and `wait_seconds` (now − deferred_since); `fence_token`;
// `last_poll`: `at`, `winner`, `heavy`, `second_pass` (task names), `deferred` (each
// `task`, `reason`, `blocker`, `since`), `posture`, `turned_degraded`, `recovered` and
// `error`; and `error`, why the StateStore could not be read.
//
// An action's answer, whatever its status: `action` ("due-now", "reroute", "pause" or
// "resume"), `user_id`, `work_key`, `outcome` ("scheduled", "already_due", "claimed",
// "rerouted", "paused", "already_paused", "resumed", "not_paused", "not_found",
// "invalid" or "failed"), `message`, and as they apply `entry` (the entry as it stands,
// as on the tenant page), `group` and `limits` (the tenant's after a reroute),
// `claimed_until` (for claimed), `paused_until` and `pause_reason` (the pause that stands
// after a pause) and `error`. A POST refused with 403 answers the error
// object.
package inspect
