package inspect

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// The chart's geometry, in SVG user units: one column per cycle; above the axis the
// cycle's items (dispatched, then lost claims), below it the users it left waiting (shed,
// then limited).
const (
	chartColumns = 120 // the most cycles a chart shows: the latest
	chartColumn  = 8
	chartBar     = 6
	chartTop     = 40 // height of the items area
	chartBottom  = 24 // height of the users area
)

// chartData is one lane's inline SVG chart.
type chartData struct {
	Wide       bool // the lane page's larger chart
	W, H, Axis int
	Cols       []chartCol
	MaxItems   int
	MaxUsers   int
}

// chartCol is one cycle's column: its bars and the tooltip that says its figures.
type chartCol struct {
	Title string
	Rects []chartRect
}

type chartRect struct {
	X, Y, W, H int
	Class      string
}

// chartOf lays out the chart of a lane's cycles, oldest first.
func chartOf(cycles []laneCycleJSON) chartData {
	cycles = cycles[max(0, len(cycles)-chartColumns):]
	c := chartData{W: max(len(cycles), 30) * chartColumn, H: chartTop + 1 + chartBottom, Axis: chartTop, MaxItems: 1, MaxUsers: 1}
	for _, cy := range cycles {
		c.MaxItems = max(c.MaxItems, cy.Dispatched+cy.LostClaims)
		c.MaxUsers = max(c.MaxUsers, cy.Shed+cy.Limited)
	}
	for n, cy := range cycles {
		x := c.W - (len(cycles)-n)*chartColumn + (chartColumn-chartBar)/2
		col := chartCol{Title: fmt.Sprintf("%s: %d dispatched, %d lost claims; %d users shed, %d limited; longest wait %s",
			timestamp(cy.At), cy.Dispatched, cy.LostClaims, cy.Shed, cy.Limited, humanSeconds(cy.WaitSeconds))}
		y := chartTop
		for _, s := range []struct {
			v     int
			class string
		}{{cy.Dispatched, "dispatched"}, {cy.LostClaims, "lost"}} {
			if h := barHeight(s.v, c.MaxItems, chartTop); h > 0 {
				y -= h
				col.Rects = append(col.Rects, chartRect{X: x, Y: y, W: chartBar, H: h, Class: s.class})
			}
		}
		y = chartTop + 1
		for _, s := range []struct {
			v     int
			class string
		}{{cy.Shed, "shed"}, {cy.Limited, "limited"}} {
			if h := barHeight(s.v, c.MaxUsers, chartBottom); h > 0 {
				col.Rects = append(col.Rects, chartRect{X: x, Y: y, W: chartBar, H: h, Class: s.class})
				y += h
			}
		}
		c.Cols = append(c.Cols, col)
	}
	return c
}

// wideChartOf is chartOf for the lane page.
func wideChartOf(cycles []laneCycleJSON) chartData {
	c := chartOf(cycles)
	c.Wide = true
	return c
}

// svg renders c as inline SVG. Every value written is a number, a class name of this file
// or an escaped title, so the markup is safe to embed; it is written here rather than by a
// template because a chart is hundreds of elements and a page holds one per lane.
func (c chartData) svg() template.HTML {
	var b strings.Builder
	class := "chart"
	if c.Wide {
		class += " wide"
	}
	fmt.Fprintf(&b, `<svg class="%s" viewBox="0 0 %d %d" preserveAspectRatio="none" role="img" aria-label="last cycles: items dispatched and lost above the line, users shed and limited below">`, class, c.W, c.H)
	fmt.Fprintf(&b, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"/>`, c.Axis, c.W, c.Axis)
	for _, col := range c.Cols {
		b.WriteString("<g><title>")
		b.WriteString(template.HTMLEscapeString(col.Title))
		b.WriteString("</title>")
		for _, r := range col.Rects {
			fmt.Fprintf(&b, `<rect class="%s" x="%d" y="%d" width="%d" height="%d"/>`, r.Class, r.X, r.Y, r.W, r.H)
		}
		b.WriteString("</g>")
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// chartHTML and wideChartHTML are the overview's and the lane page's charts.
func chartHTML(cycles []laneCycleJSON) template.HTML { return chartOf(cycles).svg() }

func wideChartHTML(cycles []laneCycleJSON) template.HTML { return wideChartOf(cycles).svg() }

// barHeight is v's share of area at scale top, at least 1 when v > 0.
func barHeight(v, top, area int) int {
	if v <= 0 {
		return 0
	}
	return max(1, int(math.Round(float64(v)/float64(top)*float64(area))))
}
