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

// WriteTable prints r as the program's first table: the scenario, then one row per policy.
func WriteTable(w io.Writer, r Result) error {
	c := r.Config
	simulated := time.Duration(c.Cycles) * c.Cycle
	var b strings.Builder
	fmt.Fprintf(&b, "noisy neighbour, seed %d: %s quiet tenants with %d–%d sources each, 1 noisy tenant with %s sources;\n",
		c.Seed, thousands(c.QuietTenants), c.QuietSources[0], c.QuietSources[1], thousands(c.NoisySources))
	fmt.Fprintf(&b, "every source due every %v; capacity %d per %v cycle; %d cycles (%v simulated)\n\n",
		c.Interval, c.Capacity, c.Cycle, c.Cycles, simulated)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "policy\tquiet wait p50\tp99\tmax\tquiet served\tnoisy served/h\tJain's index\tlongest wait\talarm on\t\n")
	for _, p := range r.Policies {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%d\t%.0f\t%.4f\t%v\t%d of %d cycles\t\n",
			p.Name, p.QuietWaitP50.Round(time.Second), p.QuietWaitP99.Round(time.Second), p.QuietWaitMax.Round(time.Second),
			p.QuietServed, p.NoisyPerHour, p.Jain, p.LongestWait.Round(time.Second), p.AlarmCycles, c.Cycles)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, `
quiet wait: from DueAt to the dispatching cycle. Jain's index: over each tenant's served / max-min fair share
(1: every tenant got its share). longest wait: the most, over the cycles, of now − WaitingSince, how long the
longest-waiting ready tenant had waited for its turn; alarm on: the cycles in which it passed %v, those in
which a Runner with that AlarmAfter keeps its noisy-neighbour alarm on.
`, c.AlarmAfter)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCostTable prints r as the program's second table: per run, the mean and the largest
// figure of its cycles; with CostConfig.Wall, also the mean wall-clock time of a Dispatch.
func WriteCostTable(w io.Writer, r CostResult) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "cycle cost, rota: 1 noisy tenant with %s sources and N quiet tenants with one source each, all due at once,\n",
		thousands(c.NoisySources))
	fmt.Fprintf(&b, "every source due again %v after it ran; capacity %d per %v cycle; %d cycles; figures per cycle, mean / max\n\n",
		c.Interval, c.Capacity, c.Cycle, c.Cycles)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "quiet tenants N\ttenants with due work\tusers read\tentries read\tIndex calls\tLaneFor calls\tdispatched\t"
	if c.Wall {
		header += "wall clock\t"
	}
	fmt.Fprint(tw, header+"\n")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t", thousands(run.QuietTenants))
		for _, of := range []func(CycleCost) int{
			func(cc CycleCost) int { return cc.DueTenants },
			func(cc CycleCost) int { return cc.UsersRead },
			func(cc CycleCost) int { return cc.EntriesRead },
			func(cc CycleCost) int { return cc.IndexCalls },
			func(cc CycleCost) int { return cc.LaneForCalls },
			func(cc CycleCost) int { return cc.Dispatched },
		} {
			mean, most := meanMax(run.Cycles, of)
			fmt.Fprintf(tw, "%s / %s\t", thousands(mean), thousands(most))
		}
		if c.Wall {
			fmt.Fprintf(tw, "%v\t", run.Wall.Round(time.Microsecond))
		}
		fmt.Fprint(tw, "\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString(`
users and entries read: what the cycle's Index.Ready calls returned; tenants with due work: what a cycle that
ranked every tenant with due work would have read. A cycle reads what it can serve, however many tenants wait.
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// meanMax returns the rounded mean and the maximum of of over cycles.
func meanMax(cycles []CycleCost, of func(CycleCost) int) (mean, most int) {
	sum := 0
	for _, cc := range cycles {
		v := of(cc)
		sum += v
		most = max(most, v)
	}
	if len(cycles) == 0 {
		return 0, 0
	}
	return int(math.Round(float64(sum) / float64(len(cycles)))), most
}

// thousands prints n with commas between groups of three digits.
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// WriteSVG draws the quiet tenants' wait over time under every policy of r on one chart:
// x is simulated time in minutes; y is the wait on a log scale from 1 s (shorter waits are
// drawn at 1 s) to the first decade tick above the longest p99; per policy a solid line for
// the p99 and a dashed one for the p50 of each bucket of BucketCycles cycles.
func WriteSVG(w io.Writer, r Result) error {
	longest := 10 * time.Second
	for _, p := range r.Policies {
		for _, pt := range p.Series {
			longest = max(longest, pt.P99)
		}
	}
	ch := chart{
		title:  fmt.Sprintf("Quiet tenants' wait beside one noisy tenant (seed %d, %d dispatches per %v cycle)", r.Config.Seed, r.Config.Capacity, r.Config.Cycle),
		about:  "Quiet tenants' wait over time: first come, first served and rota",
		xLabel: "simulated time (minutes)",
		yLabel: "quiet tenants' wait, due to dispatched (log scale)",
		xMax:   (time.Duration(r.Config.Cycles) * r.Config.Cycle).Minutes(),
		yTicks: ticksUpTo([]tick{{1, "1 s"}, {10, "10 s"}, {60, "1 min"}, {600, "10 min"}, {3600, "1 h"}, {36000, "10 h"}, {360000, "100 h"}}, longest.Seconds()),
	}
	for _, p := range r.Policies {
		for _, s := range []struct {
			stat, dash string
			of         func(Point) time.Duration
		}{
			{"p99", "", func(pt Point) time.Duration { return pt.P99 }},
			{"p50", dashed, func(pt Point) time.Duration { return pt.P50 }},
		} {
			sr := series{label: policyLabel(p.Name) + ", " + s.stat, colour: policyColour(p.Name), dash: s.dash}
			for _, pt := range p.Series {
				if pt.N > 0 {
					sr.points = append(sr.points, [2]float64{pt.At.Minutes(), s.of(pt).Seconds()})
				}
			}
			ch.series = append(ch.series, sr)
		}
	}
	return ch.write(w)
}

// WriteCostSVG draws, per cycle of each run of r, the tenants with due work and the users
// and entries the cycle read, on a log scale: the first grows with the tenants, the others
// do not. Each run has its own dash pattern, each figure its own colour.
func WriteCostSVG(w io.Writer, r CostResult) error {
	most := 10
	for _, run := range r.Runs {
		for _, cc := range run.Cycles {
			most = max(most, cc.DueTenants, cc.UsersRead, cc.EntriesRead)
		}
	}
	ch := chart{
		title:  fmt.Sprintf("What a dispatch cycle reads (capacity %d per cycle)", r.Config.Capacity),
		about:  "Per cycle: tenants with due work, and the users and entries rota's cycle read",
		xLabel: "cycle",
		yLabel: "per cycle (log scale)",
		xMax:   float64(r.Config.Cycles),
		yTicks: ticksUpTo([]tick{{1, "1"}, {10, "10"}, {100, "100"}, {1e3, "1k"}, {1e4, "10k"}, {1e5, "100k"}, {1e6, "1M"}, {1e7, "10M"}}, float64(most)),
	}
	dashes := []string{"", dashed, dotted}
	for _, f := range []struct {
		what, colour string
		of           func(CycleCost) int
	}{
		{"tenants with due work", fcfsColour, func(cc CycleCost) int { return cc.DueTenants }},
		{"users read", rotaColour, func(cc CycleCost) int { return cc.UsersRead }},
		{"entries read", entriesColour, func(cc CycleCost) int { return cc.EntriesRead }},
	} {
		for i, run := range r.Runs {
			sr := series{label: fmt.Sprintf("%s, %s quiet", f.what, thousands(run.QuietTenants)), colour: f.colour, dash: dashes[i%len(dashes)]}
			for k, cc := range run.Cycles {
				sr.points = append(sr.points, [2]float64{float64(k + 1), float64(f.of(cc))})
			}
			ch.series = append(ch.series, sr)
		}
	}
	return ch.write(w)
}

// chart geometry, in SVG user units, and colours.
const (
	chartW, chartH                     = 760, 480
	marginL, marginR, marginT, marginB = 84, 20, 40, 145
	plotW                              = chartW - marginL - marginR
	plotH                              = chartH - marginT - marginB
	legendTop, legendRow, legendCol    = chartH - 82, 22, 340
	axisColour, gridColour, textColour = "#333", "#ddd", "#222"
	fcfsColour, rotaColour             = "#d62728", "#1f77b4"
	entriesColour, fallbackColour      = "#2ca02c", "#7f7f7f"
	dashed, dotted                     = ` stroke-dasharray="6 4"`, ` stroke-dasharray="2 3"`
)

// tick is a mark on the log-scale y axis.
type tick struct {
	v     float64
	label string
}

// ticksUpTo returns the ticks of all up to the first at or above top (all of them if none is).
func ticksUpTo(all []tick, top float64) []tick {
	for i, t := range all {
		if t.v >= top {
			return all[:i+1]
		}
	}
	return all
}

// series is one line of a chart: (x, y) points, in order.
type series struct {
	label, colour, dash string
	points              [][2]float64
}

// chart is a line chart with a linear x axis from 0 to xMax and a log y axis from the first
// of yTicks to the last (values below the first are drawn on it), and a legend of two
// columns. It is written as plain SVG 1.1: a title, axes with ticks and labels, a legend.
type chart struct {
	title, about   string // the heading and the SVG <title>
	xLabel, yLabel string
	xMax           float64
	yTicks         []tick // ascending, at least two
	series         []series
}

func (ch chart) write(w io.Writer) error {
	var b strings.Builder
	xStep, xTop := niceTicks(ch.xMax)
	yBottom, yTop := ch.yTicks[0].v, ch.yTicks[len(ch.yTicks)-1].v
	px := func(x float64) float64 { return marginL + x/xTop*plotW }
	py := func(y float64) float64 {
		y = max(y, yBottom)
		return marginT + plotH - math.Log(y/yBottom)/math.Log(yTop/yBottom)*plotH
	}

	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<title>%s</title>
<rect x="0" y="0" width="%d" height="%d" fill="white"/>
<text x="%d" y="22" text-anchor="middle" font-size="15" fill="%s">%s</text>
`, chartW, chartH, chartW, chartH, html.EscapeString(ch.about), chartW, chartH, chartW/2, textColour, html.EscapeString(ch.title))

	b.WriteString(`<g id="x-axis">` + "\n")
	for v := 0.0; v <= xTop+xStep/2; v += xStep {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, marginT, x, marginT+plotH, gridColour)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, marginT+plotH, x, marginT+plotH+5, axisColour)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", x, marginT+plotH+19, textColour, tickLabel(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", marginL+plotW/2, marginT+plotH+40, textColour, html.EscapeString(ch.xLabel))
	b.WriteString("</g>\n" + `<g id="y-axis">` + "\n")
	for _, t := range ch.yTicks {
		y := py(t.v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", marginL, y, marginL+plotW, y, gridColour)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", marginL-5, y, marginL, y, axisColour)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="%s">%s</text>`+"\n", marginL-8, y, textColour, t.label)
	}
	fmt.Fprintf(&b, `<text x="18" y="%d" text-anchor="middle" transform="rotate(-90 18 %d)" fill="%s">%s</text>`+"\n",
		marginT+plotH/2, marginT+plotH/2, textColour, html.EscapeString(ch.yLabel))
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", marginL, marginT+plotH, marginL+plotW, marginT+plotH, axisColour)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", marginL, marginT, marginL, marginT+plotH, axisColour)

	b.WriteString(`<g id="legend">` + "\n")
	var lines strings.Builder
	for i, s := range ch.series {
		pts := make([]string, len(s.points))
		for j, p := range s.points {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1]))
		}
		label := html.EscapeString(s.label)
		fmt.Fprintf(&lines, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`+"\n",
			s.colour, s.dash, strings.Join(pts, " "), label)
		x, y := marginL+(i%2)*legendCol, legendTop+(i/2)*legendRow
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x, y, x+30, y, s.colour, s.dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle" fill="%s">%s</text>`+"\n", x+38, y, textColour, label)
	}
	b.WriteString("</g>\n" + `<g id="series">` + "\n" + lines.String() + "</g>\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// policyLabel is a policy's name in the legend.
func policyLabel(name string) string {
	if name == "fcfs" {
		return "first come, first served"
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
