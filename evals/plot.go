package evals

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// point is one candidate on a trade-off chart. XHigh, when above X, draws a
// bar from X to XHigh (p50 to p95 latency). Index picks the candidate's
// colour and shape, the same on every chart.
type point struct {
	X, Y, XHigh float64
	Index       int
	Label       string
}

// plotTradeOff draws accuracy (y) against cost or latency (x), one point
// per candidate with its own colour and shape and a legend, and saves it as
// a PNG. With no points it still draws the empty chart, titled with why.
func plotTradeOff(file, title, xLabel string, points []point, empty string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "accuracy"
	p.Add(plotter.NewGrid())
	if len(points) == 0 {
		p.Title.Text += "\n" + empty
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
	}

	// The legend goes bottom right: expensive (or slow) and inaccurate is
	// where candidates rarely are.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	minY, maxX := 1.0, 0.0
	for _, pt := range points {
		xy := plotter.XYs{{X: pt.X, Y: pt.Y}}
		clr := plotutil.Color(pt.Index)
		minY = math.Min(minY, pt.Y)
		maxX = math.Max(maxX, math.Max(pt.X, pt.XHigh))
		if pt.XHigh > pt.X {
			eb, err := plotter.NewXErrorBars(struct {
				plotter.XYs
				plotter.XErrors
			}{xy, plotter.XErrors{{Low: 0, High: pt.XHigh - pt.X}}})
			if err != nil {
				return err
			}
			eb.LineStyle.Color = clr
			p.Add(eb)
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Shape = plotutil.Shape(pt.Index)
		sc.GlyphStyle.Radius = vg.Points(4)
		sc.GlyphStyle.Color = clr
		p.Add(sc)
		p.Legend.Add(pt.Label, sc)
	}

	// An accuracy axis that starts a little below the worst candidate, so
	// differences stay visible, and room on the right.
	p.X.Min = 0
	p.X.Max = maxX*1.15 + 1e-9
	p.Y.Min = math.Max(0, math.Floor((minY-0.05)*20)/20)
	p.Y.Max = 1.01
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

// plotConfusion draws a candidate's confusion matrix: rows are the labels,
// columns the answers (yes, no, FAILED); right answers are green, wrong
// ones red, darker for more.
func plotConfusion(file, title string, c Confusion) error {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.X.Label.Text = "answer"
	p.Y.Label.Text = "label"
	cells := confusionCells{
		// {column, row, count, right}
		{0, 1, c.TP, true}, {1, 1, c.FN, false}, {2, 1, c.FailedYes, false},
		{0, 0, c.FP, false}, {1, 0, c.TN, true}, {2, 0, c.FailedNo, false},
	}
	p.Add(cells)
	xys := make(plotter.XYs, len(cells))
	labels := make([]string, len(cells))
	for i, cell := range cells {
		xys[i] = plotter.XY{X: float64(cell.col), Y: float64(cell.row)}
		labels[i] = fmt.Sprint(cell.n)
	}
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i] = text.Style{
			Font: font.From(plotter.DefaultFont, vg.Points(16)), Handler: plot.DefaultTextHandler,
			XAlign: text.XCenter, YAlign: text.YCenter,
		}
	}
	p.Add(lb)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = -0.5, 2.5, -0.5, 1.5
	p.X.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "yes"}, {Value: 1, Label: "no"}, {Value: 2, Label: "FAILED"}}
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "no"}, {Value: 1, Label: "yes"}}
	return p.Save(4.5*vg.Inch, 3.2*vg.Inch, file)
}

type confusionCell struct {
	col, row, n int
	right       bool
}

// confusionCells is a plotter that fills one square per cell.
type confusionCells []confusionCell

func (cs confusionCells) Plot(c draw.Canvas, p *plot.Plot) {
	total := 0
	for _, cell := range cs {
		total += cell.n
	}
	trX, trY := p.Transforms(&c)
	for _, cell := range cs {
		share := ratio(cell.n, total)
		// White for none, up to a strong green (right) or red (wrong).
		shade := uint8(255 - math.Round(155*math.Sqrt(share)))
		clr := color.RGBA{R: 255, G: shade, B: shade, A: 255}
		if cell.right {
			clr = color.RGBA{R: shade, G: 255, B: shade, A: 255}
		}
		x0, x1 := trX(float64(cell.col)-0.5), trX(float64(cell.col)+0.5)
		y0, y1 := trY(float64(cell.row)-0.5), trY(float64(cell.row)+0.5)
		pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(clr, pts)
		c.StrokeLines(draw.LineStyle{Color: color.Gray{Y: 200}, Width: vg.Points(0.5)}, append(pts, pts[0]))
	}
}

func (cs confusionCells) DataRange() (xmin, xmax, ymin, ymax float64) {
	return -0.5, 2.5, -0.5, 1.5
}
