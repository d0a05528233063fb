package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// panel is one small chart of the scale plot: a cost against pods.
type panel struct {
	title string
	y     func(st scaleStep) float64
}

// scalePanels are the costs scale.png draws against the cluster's size.
var scalePanels = []panel{
	{"master CPU ms per pod added", func(st scaleStep) float64 { return st.MasterCPUMsPerPod }},
	{"master RSS KiB per pod held", func(st scaleStep) float64 { return st.MasterKiBPerPod }},
	{"all processes' RSS, GiB", func(st scaleStep) float64 { return systemRSS(st) / (1 << 20) }},
	{"NB file MiB (compacted)", func(st scaleStep) float64 { return st.NBFileMiB }},
	{"SB logical flows, thousands", func(st scaleStep) float64 { return float64(st.SBFlows) / 1000 }},
	{"creation -> annotation p99 ms", func(st scaleStep) float64 { return st.AnnotationP99Ms }},
	{"northd CPU ms per pod created", func(st scaleStep) float64 { return st.ProbeNorthdCPUMs }},
	{"SB server CPU ms per pod created", func(st scaleStep) float64 { return st.ProbeSBServerCPUs }},
	{"cold s (blue), idle restart s (red)", func(st scaleStep) float64 { return st.ColdS }},
	{"node0000: ovn-controller RSS MiB", nodeFigure(func(st scaleStep) float64 { return st.ControllerKiB / 1024 })},
	{"node0000: OpenFlow flows, thousands", nodeFigure(func(st scaleStep) float64 { return float64(st.NodeFlows) / 1000 })},
	{"node0000: ovn-controller ms per pod", nodeFigure(func(st scaleStep) float64 { return st.ControllerCPUMsPerChange })},
}

// nodeFigure is a node0000 figure, NaN (not drawn) at a step it did not
// measure (the node side off, or stopped at its memory cap).
func nodeFigure(y func(scaleStep) float64) func(scaleStep) float64 {
	return func(st scaleStep) float64 {
		if st.NodeFlows == 0 {
			return math.NaN()
		}
		return y(st)
	}
}

const (
	panelW, panelH            = 380, 250
	marginL, marginR, marginT = 64, 16, 24
	marginB                   = 36
	plotCols                  = 3
	markerHalf                = 3
	restartPanel              = 8 // also draws the idle restart, in red
)

var (
	ink     = color.RGBA{0x20, 0x20, 0x20, 0xff}
	grid    = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	palette = []color.RGBA{{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}}
)

// plotScale draws each panel's cost against the pods of each step and
// writes the PNG.
func plotScale(path string, steps []scaleStep) error {
	rows := (len(scalePanels) + plotCols - 1) / plotCols
	img := image.NewRGBA(image.Rect(0, 0, plotCols*panelW, rows*panelH+marginT))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	label(img, 8, 16, fmt.Sprintf("ovn-k8s bench-scale: costs against pods (thousands); %d steps to %s", len(steps), steps[len(steps)-1].Size), ink)
	xs := make([]float64, len(steps))
	for i, st := range steps {
		xs[i] = float64(st.Size.Pods) / 1000
	}
	for i, p := range scalePanels {
		origin := image.Pt((i%plotCols)*panelW, marginT+(i/plotCols)*panelH)
		series := [][]float64{values(steps, p.y)}
		if i == restartPanel {
			series = append(series, values(steps, func(st scaleStep) float64 { return st.RestartS }))
		}
		drawPanel(img, origin, p.title, xs, series)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func values(steps []scaleStep, y func(scaleStep) float64) []float64 {
	out := make([]float64, len(steps))
	for i, st := range steps {
		out[i] = y(st)
	}
	return out
}

// drawPanel draws one chart: axes from 0, a tick at each x, three on y,
// each series as a line with markers (the first blue, the second red).
func drawPanel(img *image.RGBA, o image.Point, title string, xs []float64, series [][]float64) {
	x0, y0 := o.X+marginL, o.Y+panelH-marginB
	w, h := panelW-marginL-marginR, panelH-marginT-marginB
	xMax, yMax := maxOf(xs), 0.0
	for _, s := range series {
		yMax = math.Max(yMax, maxOf(s))
	}
	if xMax <= 0 {
		xMax = 1
	}
	if yMax <= 0 {
		yMax = 1
	}
	yMax *= 1.1
	px := func(x float64) int { return x0 + int(float64(w)*x/xMax) }
	py := func(y float64) int { return y0 - int(float64(h)*y/yMax) }
	label(img, o.X+marginL, o.Y+16, title, ink)
	for _, f := range []float64{0, 0.5, 1} {
		y := py(f * yMax / 1.1)
		line(img, x0, y, x0+w, y, grid)
		label(img, o.X+4, y+4, short(f*yMax/1.1), ink)
	}
	line(img, x0, y0, x0+w, y0, ink)
	line(img, x0, y0, x0, y0-h, ink)
	for _, x := range xs {
		line(img, px(x), y0, px(x), y0+4, ink)
		label(img, px(x)-10, y0+18, short(x), ink)
	}
	for si, s := range series {
		c := palette[si%len(palette)]
		for i := range s {
			if math.IsNaN(s[i]) {
				continue // not measured at this step
			}
			if i > 0 && !math.IsNaN(s[i-1]) {
				line(img, px(xs[i-1]), py(s[i-1]), px(xs[i]), py(s[i]), c)
			}
			fill(img, image.Rect(px(xs[i])-markerHalf, py(s[i])-markerHalf, px(xs[i])+markerHalf+1, py(s[i])+markerHalf+1), c)
		}
	}
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			m = math.Max(m, x)
		}
	}
	return m
}

// short formats a tick value in a few characters.
func short(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func label(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

// line draws a one-pixel line (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
