package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints r as the table the program shows: the scenario, then one row per policy.
func WriteTable(w io.Writer, r Result) error {
	c := r.Config
	simulated := time.Duration(c.Cycles) * c.Cycle
	var b strings.Builder
	fmt.Fprintf(&b, "noisy neighbour, seed %d: %d quiet tenants with %d–%d sources each, 1 noisy tenant with %d sources;\n",
		c.Seed, c.QuietTenants, c.QuietSources[0], c.QuietSources[1], c.NoisySources)
	fmt.Fprintf(&b, "every source due every %v; capacity %d per %v cycle; %d cycles (%v simulated)\n\n",
		c.Interval, c.Capacity, c.Cycle, c.Cycles, simulated)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "policy\tquiet wait p50\tp99\tmax\tquiet served\tnoisy served/h\tJain's index\t\n")
	for _, p := range r.Policies {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%d\t%.0f\t%.4f\t\n",
			p.Name, p.QuietWaitP50.Round(time.Second), p.QuietWaitP99.Round(time.Second), p.QuietWaitMax.Round(time.Second),
			p.QuietServed, p.NoisyPerHour, p.Jain)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nwait: from DueAt to the dispatching cycle; Jain's index over each tenant's served / max-min fair share (1: every tenant got its share)\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// chart geometry, in SVG user units.
const (
	chartW, chartH                         = 760, 460
	marginL, marginR, marginT, marginB     = 84, 20, 40, 125
	plotW                                  = chartW - marginL - marginR
	plotH                                  = chartH - marginT - marginB
	legendTop, legendRow, legendCol        = chartH - 62, 22, 300
	axisColour, gridColour, textColour     = "#333", "#ddd", "#222"
	fcfsColour, rotaColour, fallbackColour = "#d62728", "#1f77b4", "#7f7f7f"
)

// yTicks are the wait axis's candidate ticks: decades of seconds and minutes.
var yTicks = []struct {
	d     time.Duration
	label string
}{
	{time.Second, "1 s"}, {10 * time.Second, "10 s"}, {time.Minute, "1 min"}, {10 * time.Minute, "10 min"},
	{time.Hour, "1 h"}, {10 * time.Hour, "10 h"}, {100 * time.Hour, "100 h"},
}

// WriteSVG draws the quiet tenants' wait over time under every policy of r on one chart:
// x is simulated time in minutes; y is the wait on a log scale from 1 s (shorter waits are
// drawn at 1 s) to the first decade tick above the longest p99; per policy a solid line for
// the p99 and a dashed one for the p50 of each bucket of BucketCycles cycles. It is plain SVG
// 1.1, written by hand: axes, tick labels, axis labels, a title and a legend.
func WriteSVG(w io.Writer, r Result) error {
	var b strings.Builder
	xMax := (time.Duration(r.Config.Cycles) * r.Config.Cycle).Minutes()
	yMax := 10 * time.Second
	for _, p := range r.Policies {
		for _, pt := range p.Series {
			yMax = max(yMax, pt.P99)
		}
	}
	ticks := yTicks[:1]
	for _, t := range yTicks[1:] {
		ticks = yTicks[:len(ticks)+1]
		if t.d >= yMax {
			break
		}
	}
	yTop := ticks[len(ticks)-1].d
	xStep, xTop := niceTicks(xMax)
	px := func(m float64) float64 { return marginL + m/xTop*plotW }
	py := func(d time.Duration) float64 {
		d = max(d, time.Second)
		return marginT + plotH - math.Log(d.Seconds())/math.Log(yTop.Seconds())*plotH
	}

	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<title>Quiet tenants' wait over time: first come, first served and rota</title>
<rect x="0" y="0" width="%d" height="%d" fill="white"/>
`, chartW, chartH, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15" fill="%s">Quiet tenants' wait beside one noisy tenant (seed %d, %d dispatches per %v cycle)</text>
`, chartW/2, textColour, r.Config.Seed, r.Config.Capacity, r.Config.Cycle)

	// Grid, ticks and tick labels.
	b.WriteString(`<g id="x-axis">` + "\n")
	for v := 0.0; v <= xTop+xStep/2; v += xStep {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, marginT, x, marginT+plotH, gridColour)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, marginT+plotH, x, marginT+plotH+5, axisColour)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", x, marginT+plotH+19, textColour, tickLabel(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">simulated time (minutes)</text>`+"\n", marginL+plotW/2, marginT+plotH+40, textColour)
	b.WriteString("</g>\n" + `<g id="y-axis">` + "\n")
	for _, t := range ticks {
		y := py(t.d)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", marginL, y, marginL+plotW, y, gridColour)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", marginL-5, y, marginL, y, axisColour)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="%s">%s</text>`+"\n", marginL-8, y, textColour, t.label)
	}
	fmt.Fprintf(&b, `<text x="18" y="%d" text-anchor="middle" transform="rotate(-90 18 %d)" fill="%s">quiet tenants' wait, due to dispatched (log scale)</text>`+"\n",
		marginT+plotH/2, marginT+plotH/2, textColour)
	b.WriteString("</g>\n")
	// Axes on top of the grid.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", marginL, marginT+plotH, marginL+plotW, marginT+plotH, axisColour)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", marginL, marginT, marginL, marginT+plotH, axisColour)

	// Series, and the legend: one row per policy, p99 then p50.
	b.WriteString(`<g id="legend">` + "\n")
	var lines strings.Builder
	for i, p := range r.Policies {
		colour := policyColour(p.Name)
		for j, s := range []struct {
			stat, dash string
			of         func(Point) time.Duration
		}{
			{"p99", "", func(pt Point) time.Duration { return pt.P99 }},
			{"p50", ` stroke-dasharray="6 4"`, func(pt Point) time.Duration { return pt.P50 }},
		} {
			var pts []string
			for _, pt := range p.Series {
				if pt.N > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(pt.At.Minutes()), py(s.of(pt))))
				}
			}
			label := html.EscapeString(fmt.Sprintf("%s, %s", policyLabel(p.Name), s.stat))
			fmt.Fprintf(&lines, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`+"\n",
				colour, s.dash, strings.Join(pts, " "), label)
			x, y := marginL+j*legendCol, legendTop+i*legendRow
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x, y, x+30, y, colour, s.dash)
			fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle" fill="%s">%s</text>`+"\n", x+38, y, textColour, label)
		}
	}
	b.WriteString("</g>\n" + `<g id="series">` + "\n" + lines.String() + "</g>\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// policyLabel is a policy's name in the legend.
func policyLabel(name string) string {
	switch name {
	case "fcfs":
		return "first come, first served"
	case "rota":
		return "rota"
	}
	return name
}

func policyColour(name string) string {
	switch name {
	case "fcfs":
		return fcfsColour
	case "rota":
		return rotaColour
	}
	return fallbackColour
}

// niceTicks returns the smallest tick step of 1, 2 or 5 times a power of ten that cuts
// [0, hi] into at most ten intervals, and the axis top: the first multiple of the step at or above
// hi (one step when hi is 0).
func niceTicks(hi float64) (step, top float64) {
	if hi <= 0 || math.IsNaN(hi) || math.IsInf(hi, 0) {
		return 1, 1
	}
	raw := hi / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	top = math.Ceil(hi/step-1e-9) * step
	return step, top
}

// tickLabel prints a tick value without trailing zeros.
func tickLabel(v float64) string {
	if math.Abs(v-math.Round(v)) < 1e-9 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
