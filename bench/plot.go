package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// PlotFormat returns the image format for path from its extension ("svg"
// or "png"), or an error naming the ones supported.
func PlotFormat(path string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if ext != "svg" && ext != "png" {
		return "", fmt.Errorf("plot file %s: want a .svg or .png name", path)
	}
	return ext, nil
}

// Plot geometry: one chart per direction, stacked, and the legend beside
// them, not over the lines.
const (
	plotWidth   = 12 * vg.Inch
	panelHeight = 5 * vg.Inch
	legendWidth = 3.9 * vg.Inch // room for viewers that substitute a wider font
)

// WritePlot draws single-core throughput against message length, one chart
// for encryption and one for decryption, both axes log-scaled (so equal
// ratios look equally far apart) with enough labelled ticks to read values
// off (logTicks), one line per implementation and variant (and key size,
// when there are two; the same colour in both charts), with the raw AES
// roofline as dashed horizontal lines, and writes it to w as format ("svg"
// or "png").
func WritePlot(w io.Writer, r *Report, format string) error {
	c, err := buildChart(r)
	if err != nil {
		return err
	}
	panels, legend := c.panels, c.legend

	height := panelHeight * vg.Length(len(panels))
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch format {
	case "svg":
		canvas = vgsvg.New(plotWidth, height)
	case "png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(plotWidth, height)}
	default:
		return fmt.Errorf("unsupported plot format %q", format)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White) // an opaque page, legend area included
	dc.Fill(dc.Rectangle.Path())
	for i, p := range panels {
		top := vg.Length(i) * panelHeight
		p.Draw(draw.Crop(dc, 0, -legendWidth, height-top-panelHeight, -top))
	}
	legend.Top, legend.Left = true, true
	legend.YOffs = -vg.Points(40)
	legend.Draw(draw.Crop(dc, plotWidth-legendWidth+vg.Points(10), 0, 0, 0))
	_, err = canvas.WriteTo(w)
	return err
}

// chart is a plot before it is drawn: a panel per direction, and the
// legend with what it lists (plot.Legend keeps its entries to itself).
type chart struct {
	panels  []*plot.Plot
	legend  plot.Legend
	entries []legendEntry
}

// legendEntry is one line of the legend and the style of its series.
type legendEntry struct {
	Text   string
	Kind   string // seriesXtsctl, seriesPeer or seriesRoofline
	Color  color.Color
	Shape  draw.GlyphDrawer // nil: a line without markers (a roofline)
	Dashes []vg.Length
}

// Kinds of series, each drawn its own way: xtsctl's variants as solid
// lines, the peers dashed, the rooflines as grey dashed horizontals.
const (
	seriesXtsctl   = "xtsctl"
	seriesPeer     = "peer"
	seriesRoofline = "roofline"
)

// seriesName names a result's series in the legend: xtsctl's variant
// (and the lengths dispatch gives it), or the peer by what it is.
func seriesName(r *Report, res Result) string {
	var name string
	switch res.Impl {
	case ImplXtsctl:
		name = "xtsctl " + res.label()
		if !res.Auto {
			name += ruleOf(r.Rule, res.Variant)
		}
	case ImplXCrypto:
		name = "peer: golang.org/x/crypto/xts (Go)"
	case ImplOpenSSL:
		name = "peer: openssl speed -evp aes-xts"
	default:
		name = "peer: " + res.Impl
	}
	if len(r.Config.KeyBits) > 1 {
		name += fmt.Sprintf(" (%d-bit key)", res.KeyBits)
	}
	return name
}

func buildChart(r *Report) (*chart, error) {
	nameOf := func(res Result) string { return seriesName(r, res) }
	// Series names in first-seen order, over both directions, so that a
	// series has the same colour and marker in both charts.
	var names []string
	index := map[string]int{}
	var ops []string
	for _, res := range r.Results {
		if res.Mode != ModeUnit {
			continue
		}
		if n := nameOf(res); !slices.Contains(names, n) {
			index[n] = len(names)
			names = append(names, n)
		}
		if !slices.Contains(ops, res.Op) {
			ops = append(ops, res.Op)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no single-core results to plot")
	}
	slices.SortFunc(ops, func(a, b string) int { return strings.Compare(b, a) }) // encrypt first

	c := &chart{legend: plot.NewLegend()}
	for i, op := range ops {
		p, err := plotPanel(r, op, names, index, nameOf, i == 0, c)
		if err != nil {
			return nil, err
		}
		c.panels = append(c.panels, p)
	}
	return c, nil
}

// seriesColors are told apart at a glance and on paper: Okabe and Ito's
// colour-blind-safe eight, then darker and lighter tones of others. A
// series takes the colour of its place; past the end they come round
// again, with other markers.
var seriesColors = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermilion
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{204, 121, 167, 255}, // reddish purple
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{0, 0, 0, 255},       // black
	color.RGBA{180, 160, 0, 255},   // dark yellow
	color.RGBA{128, 0, 0, 255},     // maroon
	color.RGBA{0, 70, 0, 255},      // dark green
	color.RGBA{100, 60, 180, 255},  // violet
	color.RGBA{160, 90, 40, 255},   // brown
	color.RGBA{0, 120, 120, 255},   // teal
	color.RGBA{255, 80, 160, 255},  // pink
	color.RGBA{120, 120, 255, 255}, // periwinkle
	color.RGBA{110, 110, 110, 255}, // grey
}

// seriesShapes are the markers, one per series in turn: gonum's eight and
// four more (diamonds, downward triangles), filled and open.
var seriesShapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, diamondGlyph{fill: true},
	draw.CrossGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{},
	diamondGlyph{}, draw.PlusGlyph{}, downGlyph{}, downGlyph{fill: true},
}

// seriesStyle is the colour and marker of the i-th series: both differ
// from every other series' while there are colours and markers left
// (16 and 12), and the pair differs for up to 48 series.
func seriesStyle(i int) (color.Color, draw.GlyphDrawer) {
	return seriesColors[i%len(seriesColors)], seriesShapes[i%len(seriesShapes)]
}

// diamondGlyph is a square on its corner.
type diamondGlyph struct{ fill bool }

func (g diamondGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(0.5)})
	r := sty.Radius * 1.3
	var p vg.Path
	p.Move(vg.Point{X: pt.X, Y: pt.Y + r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y})
	p.Line(vg.Point{X: pt.X, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X - r, Y: pt.Y})
	p.Close()
	drawGlyphPath(c, sty, p, g.fill)
}

// downGlyph is a triangle pointing down.
type downGlyph struct{ fill bool }

func (g downGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(0.5)})
	r := sty.Radius * 1.25
	dx, dy := r*vg.Length(math.Cos(math.Pi/6)), r*vg.Length(math.Sin(math.Pi/6))
	var p vg.Path
	p.Move(vg.Point{X: pt.X, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X + dx, Y: pt.Y + dy})
	p.Line(vg.Point{X: pt.X - dx, Y: pt.Y + dy})
	p.Close()
	drawGlyphPath(c, sty, p, g.fill)
}

func drawGlyphPath(c *draw.Canvas, sty draw.GlyphStyle, p vg.Path, fill bool) {
	if fill {
		c.SetColor(sty.Color)
		c.Fill(p)
		return
	}
	c.Stroke(p)
}

// plotPanel draws the chart of one direction (op). Series take their
// style from their place in names; addLegend adds them to c's legend.
func plotPanel(r *Report, op string, names []string, index map[string]int, nameOf func(Result) string, addLegend bool, c *chart) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("AES-XTS %s, one core: %s", map[string]string{"encrypt": "encryption", "decrypt": "decryption"}[op], r.CPU.Model)
	p.X.Label.Text = "message length (bytes, log scale)"
	p.Y.Label.Text = "MB/s (10^6 bytes/s, log scale)"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Add(plotter.NewGrid())

	xys := make([]plotter.XYs, len(names))
	kind := make([]string, len(names))
	var sizes []int
	minX, maxX, minY, maxY := 0.0, 0.0, 0.0, 0.0
	for _, res := range r.Results {
		if res.Mode != ModeUnit || res.Op != op {
			continue
		}
		i := index[nameOf(res)]
		kind[i] = seriesXtsctl
		if res.Impl != ImplXtsctl {
			kind[i] = seriesPeer
		}
		if !slices.Contains(sizes, res.Size) {
			sizes = append(sizes, res.Size)
		}
		x, y := float64(res.Size), res.MBps.Median
		xys[i] = append(xys[i], plotter.XY{X: x, Y: y})
		if minX == 0 || x < minX {
			minX = x
		}
		if y > 0 && (minY == 0 || y < minY) {
			minY = y
		}
		maxX, maxY = max(maxX, x), max(maxY, y)
	}
	for i, pts := range xys {
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		col, shape := seriesStyle(i)
		l.Color, s.Color, s.Shape = col, col, shape
		s.Radius = vg.Points(3.5)
		if kind[i] == seriesPeer {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(2)}
		}
		p.Add(l, s)
		if addLegend {
			c.legend.Add(names[i], l, s)
			c.entries = append(c.entries, legendEntry{Text: names[i], Kind: kind[i], Color: col, Shape: shape, Dashes: l.Dashes})
		}
	}
	for i, rl := range bestRooflines(r) {
		y := rl.MBps.Median
		maxY = max(maxY, y)
		f := plotter.NewFunction(func(float64) float64 { return y })
		f.Color = color.Gray{Y: uint8(80 + 60*i)}
		f.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		f.Width = vg.Points(1.5)
		p.Add(f)
		if addLegend {
			text := fmt.Sprintf("roofline: raw AES, no XTS (%s, %d rounds)", rl.Unit, rl.Rounds)
			c.legend.Add(text, f)
			c.entries = append(c.entries, legendEntry{Text: text, Kind: seriesRoofline, Color: f.Color, Dashes: f.Dashes})
		}
	}
	p.X.Tick.Marker = sizeTicks{sizes: sizes}
	if minX == maxX { // a single length: give the log axis some width
		minX, maxX = minX/2, maxX*2
	}
	p.X.Min, p.X.Max = minX, maxX
	if minY <= 0 { // nothing measurable: keep the log axis defined
		minY, maxY = 1, 10
	}
	p.Y.Min, p.Y.Max = minY/1.5, maxY*1.5
	return p, nil
}

// logTicks labels a log axis densely enough to read values off: 1, 2 and
// 5 times each power of ten, or every step of a finer ladder when the range
// is narrow (11,000 to 26,000 MB/s gets 12k, 15k, 20k, 25k), with unlabelled
// minor ticks at each integer multiple.
type logTicks struct{}

// tickLadders are the mantissas tried, coarsest first, for at least three
// labels in range.
var tickLadders = [][]float64{
	{1, 2, 5},
	{1, 1.5, 2, 3, 5, 7},
	{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9},
	{1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2, 2.2, 2.4, 2.6, 2.8, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9},
}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	first, last := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	in := func(v float64) bool { return v >= lo*(1-1e-9) && v <= hi*(1+1e-9) }
	var labels []float64
	for _, ladder := range tickLadders {
		labels = labels[:0]
		for e := first; e <= last; e++ {
			for _, m := range ladder {
				if v := m * math.Pow(10, float64(e)); in(v) {
					labels = append(labels, v)
				}
			}
		}
		if len(labels) >= 3 {
			break
		}
	}
	var ticks []plot.Tick
	for e := first; e <= last; e++ {
		for m := 1; m <= 9; m++ {
			if v := float64(m) * math.Pow(10, float64(e)); in(v) && !slices.Contains(labels, v) {
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	for _, v := range labels {
		ticks = append(ticks, plot.Tick{Value: v, Label: tickLabel(v)})
	}
	slices.SortFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
	return ticks
}

// sizeTicks marks the message-length axis: every length measured, labelled
// in bytes where it is a power of two, and 512 and 4096 (the sector sizes
// that matter most) always labelled where the axis reaches them.
type sizeTicks struct{ sizes []int }

func (t sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	in := func(v float64) bool { return v >= lo*(1-1e-9) && v <= hi*(1+1e-9) }
	vals := map[int]bool{}
	for _, s := range t.sizes {
		vals[s] = s&(s-1) == 0
	}
	for _, s := range []int{512, 4096} {
		vals[s] = true
	}
	var ticks []plot.Tick
	for v, labelled := range vals {
		if !in(float64(v)) {
			continue
		}
		tk := plot.Tick{Value: float64(v)}
		if labelled {
			tk.Label = sizeLabel(v)
		}
		ticks = append(ticks, tk)
	}
	slices.SortFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
	return ticks
}

// sizeLabel writes a length in bytes as it is (512, 4096, 65536), and
// from a mebibyte in MiB.
func sizeLabel(v int) string {
	if v >= 1<<20 && v%(1<<20) == 0 {
		return strconv.Itoa(v>>20) + " MiB"
	}
	return strconv.Itoa(v)
}

// tickLabel writes 12000 as 12k and 1500000 as 1.5M.
func tickLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// ruleOf describes the lengths dispatch gives variant, for its legend entry:
// " (auto 16-63 B)", " (auto from 64 B)", or "" when it gives none.
func ruleOf(rule []Rule, variant string) string {
	var parts []string
	for i, x := range rule {
		if x.Variant != variant {
			continue
		}
		if i+1 < len(rule) {
			parts = append(parts, fmt.Sprintf("%d-%d B", x.MinLen, rule[i+1].MinLen-1))
		} else {
			parts = append(parts, fmt.Sprintf("from %d B", x.MinLen))
		}
	}
	if parts == nil {
		return ""
	}
	return " (auto " + strings.Join(parts, ", ") + ")"
}

// bestRooflines returns the fastest roofline unit per key size.
func bestRooflines(r *Report) []Roofline {
	best := map[int]Roofline{}
	var keys []int
	for _, rl := range r.Roofline {
		b, seen := best[rl.KeyBits]
		if !seen {
			keys = append(keys, rl.KeyBits)
		}
		if !seen || rl.MBps.Median > b.MBps.Median {
			best[rl.KeyBits] = rl
		}
	}
	var out []Roofline
	for _, k := range keys {
		out = append(out, best[k])
	}
	return out
}
