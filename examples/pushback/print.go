package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
)

// printStory writes the simulation's printout: the setting, a timeline of every source,
// what an operator sees, then the pause, the backoff and everyone else in turn.
func printStory(w io.Writer, st story) {
	fmt.Fprintf(w, "rota pushback: %d tenants polled through their upstream API by one Runner, a cycle a minute\n", len(tenants))
	fmt.Fprintf(w, "from %s to %s (simulated; times below are h:mm since %s). Every poll that succeeds finds\n",
		start.Format("15:04"), start.Add(length).Format("15:04"), start.Format("15:04"))
	fmt.Fprintln(w, "something new, so a healthy source is polled every 5m, its tier's base interval.")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The upstream: acme may make %d calls an hour, then is answered 429 with Retry-After until the\n", quota["acme"])
	p := revoked["beta/crm"]
	fmt.Fprintf(w, "next hour; beta's credentials for crm are revoked from %s to %s, and answered 401 meanwhile.\n", clock(p.from), clock(p.to))
	fmt.Fprintln(w)
	printTimeline(w, st)
	fmt.Fprintln(w)
	printOperator(w, st)
	fmt.Fprintln(w)
	printPause(w, st)
	fmt.Fprintln(w)
	printBackoff(w, st)
	fmt.Fprintln(w)
	printOthers(w, st)
}

// labelWidth is the width of the timeline's first column.
const labelWidth = 16

// printTimeline writes one row per source and one column per cycle.
func printTimeline(w io.Writer, st story) {
	cycles := int(length/step) + 1
	head := []byte(strings.Repeat(" ", labelWidth+cycles+4))
	for i := 0; i < cycles; i += 10 {
		copy(head[labelWidth+i:], clock(start.Add(time.Duration(i)*step)))
	}
	fmt.Fprintln(w, strings.TrimRight(string(head), " "))
	for _, t := range tenants {
		for _, s := range t.sources {
			row := make([]byte, cycles)
			for i := range row {
				row[i] = cell(st, t.user, s, i)
			}
			fmt.Fprintf(w, "%-*s%s\n", labelWidth, t.user+"/"+s, row)
		}
	}
	fmt.Fprintln(w, "o polled  x failed  P pushback, pausing its tenant  h handed back unstarted  - tenant paused  . not due")
}

// cell is the timeline's mark for source of user at the i-th cycle.
func cell(st story, user, source string, i int) byte {
	at := start.Add(time.Duration(i) * step)
	for _, r := range st.runs[user+"/"+source] {
		if !r.at.Equal(at) {
			continue
		}
		switch r.status {
		case bridge.StatusHit:
			return 'o'
		case bridge.StatusError:
			return 'x'
		case bridge.StatusPaused:
			return 'P'
		case bridge.StatusReleased:
			return 'h'
		default:
			return '?'
		}
	}
	if slices.ContainsFunc(st.paused[i].users, func(p duework.UserPause) bool { return p.UserID == user }) {
		return '-'
	}
	return '.'
}

// printOperator writes the Runner's lines an operator acts on, and each change of what
// Index.Paused lists.
func printOperator(w io.Writer, st story) {
	fmt.Fprintln(w, "What an operator sees. The Runner's log (its lines about sources and tenants):")
	for _, l := range st.lines {
		fmt.Fprintf(w, "  %-5s %s\n", clock(l.at), l.text)
	}
	fmt.Fprintln(w, "Index.Paused, the tenants paused at the end of a cycle, whenever it changes:")
	var last []duework.UserPause
	for _, p := range st.paused {
		if slices.Equal(p.users, last) {
			continue
		}
		last = p.users
		var s []string
		for _, u := range p.users {
			s = append(s, fmt.Sprintf("%s until %s (%s)", u.UserID, clock(u.Until), u.Reason))
		}
		if len(s) == 0 {
			s = []string{"none"}
		}
		fmt.Fprintf(w, "  %-5s %s\n", clock(p.at), strings.Join(s, ", "))
	}
}

// pause is one tenant's pause as the simulation saw it.
type pause struct {
	user, reason  string
	from, until   time.Time // the first cycle it was listed at, and its end
	during, after []poll    // the tenant's runs after from and before until, and at until
}

// pauses returns every pause Index.Paused listed, in the order they began.
func pauses(st story) []pause {
	var out []pause
	seen := map[string]bool{}
	for _, p := range st.paused {
		for _, u := range p.users {
			if k := u.UserID + u.Until.String(); !seen[k] {
				seen[k] = true
				out = append(out, pause{user: u.UserID, reason: u.Reason, from: p.at, until: u.Until})
			}
		}
	}
	for i, p := range out {
		for key, runs := range st.runs {
			if !strings.HasPrefix(key, p.user+"/") {
				continue
			}
			for _, r := range runs {
				switch {
				case r.at.After(p.from) && r.at.Before(p.until):
					out[i].during = append(out[i].during, r)
				case r.at.Equal(p.until):
					out[i].after = append(out[i].after, r)
				}
			}
		}
	}
	return out
}

// printPause writes each pause: how it began, why, what ran during it and at its end.
func printPause(w io.Writer, st story) {
	for _, p := range pauses(st) {
		var began []string
		for _, key := range sourcesOf(p.user) {
			for _, r := range st.runs[key] {
				if r.at.Equal(p.from) {
					began = append(began, fmt.Sprintf("%s %s", strings.TrimPrefix(key, p.user+"/"), r.status))
				}
			}
		}
		polled := "none of its sources was polled"
		if len(p.during) > 0 {
			polled = fmt.Sprintf("its sources were polled %d times", len(p.during))
		}
		fmt.Fprintf(w, "%s at %s, one item after another: %s\n", p.user, clock(p.from), strings.Join(began, ", "))
		fmt.Fprintln(w, "  (paused: the run whose pipeline returned the Pushback; released: handed back unstarted, as it was).")
		fmt.Fprintf(w, "  Paused until %s (%s): %s from %s to %s; at %s, %d of them were polled again.\n",
			clock(p.until), p.reason, polled, clock(p.from.Add(step)), clock(p.until.Add(-step)), clock(p.until), hits(p.after))
	}
}

// sourcesOf lists user's sources as "user/source", in the order the tenant lists them.
func sourcesOf(user string) []string {
	var keys []string
	for _, t := range tenants {
		for _, s := range t.sources {
			if t.user == user {
				keys = append(keys, t.user+"/"+s)
			}
		}
	}
	return keys
}

// hits counts the hits among runs.
func hits(runs []poll) int {
	n := 0
	for _, r := range runs {
		if r.status == bridge.StatusHit {
			n++
		}
	}
	return n
}

// printBackoff writes every run of the sources that failed: when, how it ended, its error
// streak and when it is due next.
func printBackoff(w io.Writer, st story) {
	for _, key := range failing(st) {
		fmt.Fprintf(w, "%s backs off by bridge.DefaultRetry while it fails:\n", key)
		fmt.Fprintln(w, "  run at  outcome  error streak  next due  wait")
		for _, r := range st.runs[key] {
			fmt.Fprintf(w, "  %-6s  %-7s  %12d  %-8s  %s\n", clock(r.at), r.status, r.next.ErrorStreak, clock(r.next.DueAt), short(r.next.DueAt.Sub(r.at)))
		}
		if p, ok := revoked[key]; ok {
			fmt.Fprintf(w, "  Its credentials were renewed at %s: it recovered at its next run, when its backoff said.\n", clock(p.to))
		}
	}
}

// failing lists, sorted, the sources with a failed run.
func failing(st story) []string {
	var keys []string
	for key, runs := range st.runs {
		if slices.ContainsFunc(runs, func(r poll) bool { return r.status == bridge.StatusError }) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// printOthers writes, for every source whose tenant was never paused and which never
// failed, how many times it was polled and how far apart.
func printOthers(w io.Writer, st story) {
	fmt.Fprintln(w, "Every other source, beta's others included:")
	for _, key := range unaffected(st) {
		runs := st.runs[key]
		fmt.Fprintf(w, "  %-*s%2d polls, %s to %s, %s apart\n", labelWidth-2, key, hits(runs),
			clock(runs[0].at), clock(runs[len(runs)-1].at), strings.Join(gaps(runs), " or "))
	}
}

// unaffected lists, in the tenants' order, the sources whose tenant was never paused and
// which never failed.
func unaffected(st story) []string {
	paused := map[string]bool{}
	for _, p := range pauses(st) {
		paused[p.user] = true
	}
	bad := failing(st)
	var keys []string
	for _, t := range tenants {
		for _, s := range t.sources {
			if key := t.user + "/" + s; !paused[t.user] && !slices.Contains(bad, key) {
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// gaps lists, in the order first seen, the distinct times between consecutive runs.
func gaps(runs []poll) []string {
	var out []string
	for i := 1; i < len(runs); i++ {
		if g := short(runs[i].at.Sub(runs[i-1].at)); !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// short formats a duration of whole minutes as "5m", "1h" or "1h4m".
func short(d time.Duration) string {
	s := strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
