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
	"gonum.org/v1/plot/plotutil"
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
	twoKeys := len(r.Config.KeyBits) > 1
	nameOf := func(res Result) string {
		name := res.label()
		if res.Impl == ImplXtsctl {
			name = "xtsctl " + name
			if !res.Auto {
				name += ruleOf(r.Rule, res.Variant)
			}
		}
		if twoKeys {
			name += fmt.Sprintf(" (%d-bit key)", res.KeyBits)
		}
		return name
	}
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
		return fmt.Errorf("no single-core results to plot")
	}
	slices.SortFunc(ops, func(a, b string) int { return strings.Compare(b, a) }) // encrypt first

	var panels []*plot.Plot
	legend := plot.NewLegend()
	for i, op := range ops {
		p, err := plotPanel(r, op, names, index, nameOf, i == 0, &legend)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}

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
	_, err := canvas.WriteTo(w)
	return err
}

// plotPanel draws the chart of one direction (op). Series take their
// style from their place in names; addLegend adds them to legend.
func plotPanel(r *Report, op string, names []string, index map[string]int, nameOf func(Result) string, addLegend bool, legend *plot.Legend) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("AES-XTS %s, one core: %s", map[string]string{"encrypt": "encryption", "decrypt": "decryption"}[op], r.CPU.Model)
	p.X.Label.Text = "message length (bytes, log scale)"
	p.Y.Label.Text = "MB/s (10^6 bytes/s, log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Add(plotter.NewGrid())

	xys := make([]plotter.XYs, len(names))
	minX, maxX, minY, maxY := 0.0, 0.0, 0.0, 0.0
	for _, res := range r.Results {
		if res.Mode != ModeUnit || res.Op != op {
			continue
		}
		i := index[nameOf(res)]
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
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		if addLegend {
			legend.Add(names[i], l, s)
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
			legend.Add(fmt.Sprintf("AES roofline (%s, %d rounds)", rl.Unit, rl.Rounds), f)
		}
	}
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
