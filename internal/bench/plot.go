package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"slices"
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

// Plot geometry: the legend sits beside the chart, not over the lines.
const (
	plotWidth   = 12 * vg.Inch
	plotHeight  = 6 * vg.Inch
	legendWidth = 3.9 * vg.Inch // room for viewers that substitute a wider font
)

// WritePlot draws single-core encryption throughput against message length,
// both axes log-scaled (so equal ratios look equally far apart), one line per
// implementation and variant (and key size, when there are two), with the
// raw AES roofline as dashed horizontal lines, and writes it to w as format
// ("svg" or "png").
func WritePlot(w io.Writer, r *Report, format string) error {
	p := plot.New()
	p.Title.Text = "AES-XTS encryption, one core: " + r.CPU.Model
	p.X.Label.Text = "message length (bytes, log scale)"
	p.Y.Label.Text = "MB/s (10^6 bytes/s, log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())

	twoKeys := len(r.Config.KeyBits) > 1
	type series struct {
		name string
		xys  plotter.XYs
	}
	var lines []*series
	byName := map[string]*series{}
	minX, maxX, minY, maxY := 0.0, 0.0, 0.0, 0.0
	for _, res := range r.Results {
		if res.Mode != ModeUnit || res.Op != "encrypt" {
			continue
		}
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
		s := byName[name]
		if s == nil {
			s = &series{name: name}
			byName[name] = s
			lines = append(lines, s)
		}
		x := float64(res.Size)
		s.xys = append(s.xys, plotter.XY{X: x, Y: res.MBps.Median})
		if minX == 0 || x < minX {
			minX = x
		}
		if y := res.MBps.Median; y > 0 && (minY == 0 || y < minY) {
			minY = y
		}
		maxX, maxY = max(maxX, x), max(maxY, res.MBps.Median)
	}
	if len(lines) == 0 {
		return fmt.Errorf("no single-core encryption results to plot")
	}
	var args []any
	for _, s := range lines {
		slices.SortFunc(s.xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		args = append(args, s.name, s.xys)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	for i, rl := range bestRooflines(r) {
		y := rl.MBps.Median
		maxY = max(maxY, y)
		f := plotter.NewFunction(func(float64) float64 { return y })
		f.Color = color.Gray{Y: uint8(80 + 60*i)}
		f.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		f.Width = vg.Points(1.5)
		p.Add(f)
		p.Legend.Add(fmt.Sprintf("AES roofline (%s, %d rounds)", rl.Unit, rl.Rounds), f)
	}
	if minX == maxX { // a single length: give the log axis some width
		minX, maxX = minX/2, maxX*2
	}
	p.X.Min, p.X.Max = minX, maxX
	if minY <= 0 { // nothing measurable: keep the log axis defined
		minY, maxY = 1, 10
	}
	p.Y.Min, p.Y.Max = minY/1.5, maxY*1.5

	// Draw the chart on the left and the legend on the right.
	legend := p.Legend
	p.Legend = plot.NewLegend()
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch format {
	case "svg":
		canvas = vgsvg.New(plotWidth, plotHeight)
	case "png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(plotWidth, plotHeight)}
	default:
		return fmt.Errorf("unsupported plot format %q", format)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White) // an opaque page, legend area included
	dc.Fill(dc.Rectangle.Path())
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	legend.Top, legend.Left = true, true
	legend.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - vg.Points(20)
	legend.Draw(draw.Crop(dc, plotWidth-legendWidth+vg.Points(10), 0, 0, 0))
	_, err := canvas.WriteTo(w)
	return err
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
