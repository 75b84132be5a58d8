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

// WritePlot draws single-core encryption throughput against message length
// (log scale), one line per implementation and variant (and key size, when
// there are two), with the raw AES roofline as dashed horizontal lines, and
// writes it to w as format ("svg" or "png").
func WritePlot(w io.Writer, r *Report, format string) error {
	p := plot.New()
	p.Title.Text = "AES-XTS encryption, one core: " + r.CPU.Model
	p.X.Label.Text = "message length (bytes, log scale)"
	p.Y.Label.Text = "MB/s (10^6 bytes/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	twoKeys := len(r.Config.KeyBits) > 1
	type series struct {
		name string
		xys  plotter.XYs
	}
	var lines []*series
	byName := map[string]*series{}
	minX, maxX := 0.0, 0.0
	for _, res := range r.Results {
		if res.Mode != ModeUnit || res.Op != "encrypt" {
			continue
		}
		name := res.label()
		if res.Impl == ImplXtsctl {
			name = "xtsctl " + name
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
		maxX = max(maxX, x)
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
		f := plotter.NewFunction(func(float64) float64 { return y })
		f.Color = color.Gray{Y: uint8(80 + 60*i)}
		f.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		f.Width = vg.Points(1.5)
		p.Add(f)
		p.Legend.Add(fmt.Sprintf("raw AES, %d rounds on %s (roofline)", rl.Rounds, rl.Unit), f)
	}
	if minX == maxX { // a single length: give the log axis some width
		minX, maxX = minX/2, maxX*2
	}
	p.X.Min, p.X.Max = minX, maxX
	wt, err := p.WriterTo(9*vg.Inch, 5.5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
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
