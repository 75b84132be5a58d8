package bench

import (
	"fmt"
	"image/color"
	"slices"
	"strings"
	"testing"
)

// TestPlotStructure checks the plot through its objects, not its pixels:
// the legend lists every xtsctl variant, auto, both peers and the
// roofline by name; every series has its own colour and its own marker
// (the twelve series here exhaust neither); the peers are dashed and
// xtsctl's lines solid; the length axis labels 512 and 4096 (measured or
// not) and leaves lengths that are not powers of two unlabelled, in both
// panels.
func TestPlotStructure(t *testing.T) {
	st := func(v float64) Stats { return Stats{Median: v, Runs: 1} }
	variants := []string{"generic", "aesni1", "aesni4", "aesni8", "vaes256", "vaes256c", "vaes512", "vaes512c", "vaes512x"}
	r := &Report{
		Config:   Settings{KeyBits: []int{512}},
		Rule:     []Rule{{16, "aesni4"}, {256, "vaes512"}},
		Roofline: []Roofline{{Unit: "zmm", KeyBits: 512, Rounds: 14, MBps: st(16000)}, {Unit: "xmm", KeyBits: 512, Rounds: 14, MBps: st(4000)}},
	}
	for _, op := range []string{"encrypt", "decrypt"} {
		for _, size := range []int{16, 127, 256, 1024} { // neither 512 nor 4096 measured
			add := func(res Result) {
				res.KeyBits, res.Size, res.Op, res.Mode, res.Threads = 512, size, op, ModeUnit, 1
				res.MBps = st(float64(100*size) / float64(len(r.Results)%7+1))
				r.Results = append(r.Results, res)
			}
			for _, v := range variants {
				add(Result{Impl: ImplXtsctl, Variant: v})
			}
			add(Result{Impl: ImplXtsctl, Variant: "vaes512", Auto: true})
			add(Result{Impl: ImplXCrypto})
			add(Result{Impl: ImplOpenSSL})
		}
	}
	c, err := buildChart(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.panels) != 2 {
		t.Fatalf("%d panels, want encryption and decryption", len(c.panels))
	}

	want := []string{}
	for _, v := range variants {
		want = append(want, "xtsctl "+v+ruleOf(r.Rule, v))
	}
	want = append(want, "xtsctl auto", "peer: golang.org/x/crypto/xts (Go)", "peer: openssl speed -evp aes-xts", "roofline: raw AES, no XTS (zmm, 14 rounds)")
	var got []string
	for _, e := range c.entries {
		got = append(got, e.Text)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("legend\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(got[2], "(auto 16-255 B)") || !strings.Contains(got[6], "(auto from 256 B)") {
		t.Errorf("the variants dispatch picks do not say for which lengths: %q", got)
	}

	colors := map[string]string{}
	shapes := map[string]string{}
	for _, e := range c.entries {
		switch e.Kind {
		case seriesRoofline:
			if e.Shape != nil || len(e.Dashes) == 0 {
				t.Errorf("roofline %q: marker %v, dashes %v", e.Text, e.Shape, e.Dashes)
			}
			continue
		case seriesPeer:
			if !strings.HasPrefix(e.Text, "peer: ") || len(e.Dashes) == 0 {
				t.Errorf("peer %q: dashes %v", e.Text, e.Dashes)
			}
		case seriesXtsctl:
			if len(e.Dashes) != 0 {
				t.Errorf("xtsctl series %q is dashed", e.Text)
			}
		default:
			t.Errorf("%q: kind %q", e.Text, e.Kind)
		}
		cr, cg, cb, ca := e.Color.RGBA()
		ck := fmt.Sprint(cr, cg, cb, ca)
		if other, dup := colors[ck]; dup {
			t.Errorf("%q and %q have the same colour %v", other, e.Text, e.Color)
		}
		colors[ck] = e.Text
		sk := fmt.Sprintf("%#v", e.Shape)
		if other, dup := shapes[sk]; dup {
			t.Errorf("%q and %q have the same marker %s", other, e.Text, sk)
		}
		shapes[sk] = e.Text
		if e.Color == (color.RGBA{255, 255, 255, 255}) {
			t.Errorf("%q is white on white", e.Text)
		}
	}

	for i, p := range c.panels {
		labels := map[float64]string{}
		for _, tk := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
			labels[tk.Value] = tk.Label
		}
		for v, want := range map[float64]string{16: "16", 127: "", 256: "256", 512: "512", 1024: "1024", 4096: "4096"} {
			if v > p.X.Max {
				if _, ok := labels[v]; ok {
					t.Errorf("panel %d: a tick at %v beyond the axis (max %v)", i, v, p.X.Max)
				}
				continue
			}
			if got, ok := labels[v]; !ok || got != want {
				t.Errorf("panel %d: tick at %v labelled %q (present %v), want %q", i, v, got, ok, want)
			}
		}
		if p.Title.Text == "" || !strings.Contains(p.X.Label.Text, "bytes") {
			t.Errorf("panel %d: title %q, x label %q", i, p.Title.Text, p.X.Label.Text)
		}
	}

	// 4096 is labelled wherever the axis reaches it, measured or not.
	p := c.panels[0]
	labels := map[float64]string{}
	for _, tk := range p.X.Tick.Marker.Ticks(16, 8192) {
		labels[tk.Value] = tk.Label
	}
	if labels[512] != "512" || labels[4096] != "4096" {
		t.Errorf("ticks over 16..8192: 512 %q, 4096 %q", labels[512], labels[4096])
	}
}
