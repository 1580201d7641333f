package main

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// The staleness chart: each task's staleness over the simulated time, under both pickers,
// one panel per picker, written by hand as SVG 1.1 (standard library only).
//
// Staleness is the ratio the picker ranks by, (t − last run start) / cadence, read off a
// simulation's timeline: it grows while the task waits and drops to 0 when a run starts (the
// simulation counts a task's next due time from the start of its run). Before its first run
// in the scenario a task counts from TaskSpec.LastRunAgo; one that had never run counts as
// due at the start, a ratio of 1. A ratio of 1 is "due"; the picker lets the stalest task
// go first.

// chart geometry, in SVG user units.
const (
	chW, chPanelH             = 820, 230
	chMarginL, chMarginR      = 70, 20
	chTop, chGap, chLegendH   = 40, 62, 70
	chPlotW                   = chW - chMarginL - chMarginR
	chFloor, chStep           = 0.1, 5 * time.Minute // lowest ratio drawn; sampling step
	chAxisColour, chGridColor = "#333", "#ddd"
)

// chTaskColours colour the tasks in registry order.
var chTaskColours = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"}

// stalenessPoint is one sample of a task's staleness ratio, at since the scenario's start.
type stalenessPoint struct {
	at    time.Duration
	ratio float64
}

// staleness returns task's staleness over [0, sc.Horizon] under res: a sample every step,
// plus the value just before and at each run start, so the saw-tooth is exact.
func staleness(sc Scenario, res Result, task TaskSpec, step time.Duration) []stalenessPoint {
	last := -task.LastRunAgo // since the start; one cadence ago when it had never run
	if task.LastRunAgo == 0 {
		last = -task.Cadence
	}
	ratio := func(t, from time.Duration) float64 { return float64(t-from) / float64(task.Cadence) }
	var starts []time.Duration
	for _, r := range res.Runs {
		if r.Task == task.Name && r.Start <= sc.Horizon {
			starts = append(starts, r.Start)
		}
	}
	var pts []stalenessPoint
	next := 0
	for t := time.Duration(0); ; t += step {
		t = min(t, sc.Horizon)
		for next < len(starts) && starts[next] <= t {
			s := starts[next]
			pts = append(pts, stalenessPoint{s, ratio(s, last)}, stalenessPoint{s, 0})
			last = s
			next++
		}
		pts = append(pts, stalenessPoint{t, ratio(t, last)})
		if t == sc.Horizon {
			return pts
		}
	}
}

// writeChartFile simulates sc under both pickers and writes the staleness chart to path.
func writeChartFile(path string, sc Scenario) error {
	var results []Result
	for _, p := range []Picker{Static, Rota} {
		res, err := Simulate(sc, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		results = append(results, res)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeChart(f, sc, results); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// writeChart draws one panel per result, stacked, sharing the axes' scales: x is simulated
// time in hours, y the staleness ratio on a log scale from chFloor (lower values, such as
// the 0 right after a run starts, are drawn at chFloor) to the first power of ten above the
// highest ratio. A dashed line marks ratio 1, due.
func writeChart(w io.Writer, sc Scenario, results []Result) error {
	series := make([][][]stalenessPoint, len(results))
	top := 10.0
	for i, res := range results {
		for _, t := range sc.Tasks {
			s := staleness(sc, res, t, chStep)
			for _, p := range s {
				for p.ratio > top {
					top *= 10
				}
			}
			series[i] = append(series[i], s)
		}
	}
	hours := sc.Horizon.Hours()
	xStep := 6.0
	if hours <= 12 {
		xStep = 1
	}
	height := chTop + len(results)*(chPanelH+chGap) + chLegendH
	px := func(at time.Duration) float64 { return chMarginL + at.Hours()/hours*chPlotW }
	decades := math.Log10(top / chFloor)

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<title>Maintenance tasks' staleness over time under both pickers</title>
<rect x="0" y="0" width="%d" height="%d" fill="white"/>
<text x="%d" y="22" text-anchor="middle" font-size="15" fill="#222">Staleness of each maintenance task, (now − last run start) / cadence, in the backlog incident</text>
`, chW, height, chW, height, chW, height, chW/2)
	for i, res := range results {
		y0 := chTop + i*(chPanelH+chGap) + 20 // the panel's plot top
		py := func(r float64) float64 {
			r = math.Max(r, chFloor)
			return float64(y0) + chPanelH - math.Log10(r/chFloor)/decades*chPanelH
		}
		fmt.Fprintf(&b, `<g id="panel-%d">`+"\n", i+1)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" fill="#222">%s</text>`+"\n", chMarginL, y0-8, html.EscapeString(string(res.Picker)))
		b.WriteString(`<g class="x-axis">` + "\n")
		for h := 0.0; h <= hours+1e-9; h += xStep {
			x := px(time.Duration(h * float64(time.Hour)))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, y0, x, y0+chPanelH, chGridColor)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#222">%g</text>`+"\n", x, y0+chPanelH+16, h)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#222">simulated time (hours)</text>`+"\n", chMarginL+chPlotW/2, y0+chPanelH+34)
		b.WriteString("</g>\n" + `<g class="y-axis">` + "\n")
		for r := chFloor; r <= top*1.0001; r *= 10 {
			y := py(r)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", chMarginL, y, chMarginL+chPlotW, y, chGridColor)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#222">%g</text>`+"\n", chMarginL-6, y, r)
		}
		fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)" fill="#222">staleness ratio (log scale)</text>`+"\n", y0+chPanelH/2, y0+chPanelH/2)
		b.WriteString("</g>\n")
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="4 3"><title>ratio 1: due</title></line>`+"\n", chMarginL, py(1), chMarginL+chPlotW, py(1), chAxisColour)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", chMarginL, y0+chPanelH, chMarginL+chPlotW, y0+chPanelH, chAxisColour)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", chMarginL, y0, chMarginL, y0+chPanelH, chAxisColour)
		for j, t := range sc.Tasks {
			pts := make([]string, len(series[i][j]))
			for k, p := range series[i][j] {
				pts[k] = fmt.Sprintf("%.1f,%.1f", px(p.at), py(p.ratio))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"><title>%s</title></polyline>`+"\n",
				chTaskColours[j%len(chTaskColours)], strings.Join(pts, " "), html.EscapeString(t.Name))
		}
		b.WriteString("</g>\n")
	}
	// Legend: the tasks, then the due line.
	ly := height - chLegendH + 30
	b.WriteString(`<g id="legend">` + "\n")
	x := chMarginL
	for j, t := range sc.Tasks {
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", x, ly, x+24, ly, chTaskColours[j%len(chTaskColours)])
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle" fill="#222">%s</text>`+"\n", x+30, ly, html.EscapeString(t.Name))
		x += 30 + 7*len(t.Name) + 22
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-dasharray="4 3"/>`+"\n", chMarginL, ly+22, chMarginL+24, ly+22, chAxisColour)
	fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle" fill="#222">ratio 1: due; a task that had never run counts as due at the start</text>`+"\n", chMarginL+30, ly+22)
	b.WriteString("</g>\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
